"""The least data each claim of the report needs. Below a limit the report withholds the claim
and says why, naming the limit (one place, so the report and its tests agree)."""

from __future__ import annotations

# Intervals that resample annotators: a percentile bootstrap over fewer clusters is too narrow.
MIN_ANNOTATORS_FOR_INTERVALS = 20
# The top and bottom 5% of annotators: with fewer than 20 the "5%" is one annotator or none.
MIN_ANNOTATORS_FOR_RANGE = 20
# A test across annotators (the Wilcoxon test of per-annotator learning trends).
MIN_ANNOTATORS_FOR_TEST = 10
# Mean points of the rounds citing one reason.
MIN_ROUNDS_PER_REASON = 10
# Krippendorff's alpha and its interval over texts: texts with at least two annotations.
MIN_TEXTS_FOR_AGREEMENT = 10
# Shares of the comment classes: unique comments.
MIN_COMMENTS_FOR_SHARES = 20
# Text difficulty in the item-response model: the share of texts with at least two annotators.
MIN_SHARE_OF_TEXTS_SEEN_TWICE = 0.5
# A point of a learning curve (the mean of the annotators' n-th rounds).
MIN_ANNOTATORS_PER_POINT = 5
