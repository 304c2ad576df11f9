#!/usr/bin/env bash
# Install R with lme4 and lmerTest from Debian if they are missing: analysis/mixed.py fits the
# crossed mixed models through them (rpy2, pinned in requirements-research.txt, is the bridge).
set -euo pipefail
if command -v Rscript >/dev/null \
  && Rscript -e 'quit(status = !all(sapply(c("lme4", "lmerTest"), requireNamespace, quietly = TRUE)))' \
    >/dev/null 2>&1; then
  exit 0
fi
echo "Installing R with lme4 and lmerTest for the mixed models…"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  r-base-core r-cran-lme4 r-cran-lmertest >/dev/null
Rscript -e 'cat("R", R.version$major, R.version$minor, "lme4", format(packageVersion("lme4")), "\n")'
