// Progressive enhancement for the site. Every action also works without this script: forms post
// and the server redirects. With it, a round's actions are one request each and the page is not
// reloaded: the server answers `X-Requested-With: fetch` posts with the updated round.
(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.add("js");

  function visible(element) {
    return !!element && !element.closest("[hidden]") && element.getClientRects().length > 0;
  }

  // The "Why sentence N?" panel when it is open (null when shut, or not on this page).
  function openPanel() {
    var panel = document.getElementById("why");
    return panel && !panel.hidden && visible(panel) ? panel : null;
  }

  // --- Keyboard shortcuts: an element with data-key="x" is activated by pressing x. ---------
  // While the reason panel is open only its own keys count (its chips' digits; Enter submits,
  // Esc closes it): H or M there would answer the round behind the player's back.
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    var panel = openPanel();
    if (event.key === "Escape" && panel && panel.dataset.closable) {
      event.preventDefault();
      closePanel(panel);
      return;
    }
    var target = event.target;
    var tag = target && target.tagName;
    var typing = tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable) ||
      (tag === "INPUT" && !/^(checkbox|radio|submit|button)$/.test(target.type));
    if (event.key === "Enter" && !typing && target && target.closest && target.closest("form.why") &&
        tag === "INPUT") {
      event.preventDefault();
      submitWhy(target.closest("form.why"));
      return;
    }
    if (typing) return;
    var key = event.key && event.key.toLowerCase();
    if (!key || key.length !== 1) return;
    var controls = document.querySelectorAll('[data-key="' + key + '"]');
    var control = null;
    for (var i = 0; i < controls.length; i++) {
      if (panel && !panel.contains(controls[i])) continue;
      if (visible(controls[i])) { control = controls[i]; break; }
    }
    if (!control) return;
    event.preventDefault();
    if (control.type === "checkbox") { control.click(); return; }
    if (control.dataset.busy) return;
    control.dataset.busy = "1";
    control.click();
  });
  // Lets tests (and scripts) know the shortcuts are active on this page.
  root.dataset.keys = "ready";

  // --- The menu collapses behind a button on small screens. ---------------------------------
  var toggle = document.querySelector(".menu-toggle");
  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener("click", function () {
      var open = toggle.getAttribute("aria-expanded") === "true";
      toggle.setAttribute("aria-expanded", open ? "false" : "true");
    });
  }

  // --- Rounds: one request per action, the answer's panel without a request. ----------------
  function placeFocus(article) {
    if (article.dataset.state === "answered") {
      // The verdict, then the coloured sentences right under it.
      var result = document.getElementById("result");
      if (result) {
        result.focus({ preventScroll: true });
        result.scrollIntoView({ block: "start" });
      }
      return;
    }
    var latest = document.getElementById("latest");
    if (latest) {
      latest.focus({ preventScroll: true });
      latest.scrollIntoView({ block: "center" });
    }
  }

  function swapRound(html) {
    var parsed = new DOMParser().parseFromString(html, "text/html");
    var fresh = parsed.getElementById("round");
    var current = document.getElementById("round");
    if (!fresh || !current) return false;
    current.replaceWith(document.adoptNode(fresh));
    placeFocus(fresh);
    return true;
  }

  function post(form, headers) {
    // URL-encoded, as the browser posts a form itself: the server parses it faster than a
    // multipart body (docs/performance.md), and the fields are the same.
    return fetch(form.action, {
      method: "POST",
      body: new URLSearchParams(new FormData(form)),
      credentials: "same-origin",
      headers: Object.assign({ "X-Requested-With": "fetch" }, headers || {}),
    });
  }

  function submitWhy(form) {
    var chosen = form.querySelector("input[name=reasons]:checked");
    var words = form.querySelector("textarea[name=explanation]");
    if (!chosen && !(words && words.value.trim())) {
      var note = form.querySelector(".why-note");
      if (!note) {
        note = document.createElement("p");
        note.className = "error why-note";
        note.setAttribute("role", "alert");
        form.querySelector("fieldset").after(note);
      }
      note.textContent = "Tap at least one reason (“Just a hunch” is fine), or write a few words.";
      var first = form.querySelector("input[name=reasons]");
      if (first) first.focus();
      return;
    }
    form.requestSubmit();
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.dataset.submitted) { event.preventDefault(); return; }
    form.dataset.submitted = "1";
    var mode = form.dataset.enhance;
    if (mode === undefined || !window.fetch || !window.DOMParser) return;
    event.preventDefault();
    if (mode === "vote") { vote(form); return; }
    post(form)
      .then(function (response) {
        // A new round (the next text) comes with its own address.
        var address = response.headers.get("X-Round-URL");
        return response.text().then(function (html) {
          if (!swapRound(html)) { fallback(form); return; }
          if (address && address !== location.pathname) history.pushState(null, "", address);
        });
      })
      .catch(function () { fallback(form); });
  });
  // Back and forward across rounds: show the page of that address.
  window.addEventListener("popstate", function () { location.reload(); });

  function fallback(form) {
    // Anything but a round came back (an expired session, a limit): let the browser post the
    // form itself and show the server's page.
    delete form.dataset.submitted;
    form.removeAttribute("data-enhance");
    HTMLFormElement.prototype.submit.call(form);
  }

  function vote(form) {
    var button = form.querySelector("button");
    post(form)
      .then(function (response) { return response.json(); })
      .then(function (data) {
        if (data.upvotes !== undefined) {
          form.querySelector("[data-upvotes]").textContent = data.upvotes;
          form.querySelector("[data-vote-label]").textContent = "Up-voted";
        } else if (data.error) {
          button.title = data.error;
        }
        button.disabled = true;
      })
      .catch(function () { fallback(form); });
  }

  // The reason panel opens under the sentence being flagged. On a phone it is taller than the
  // screen: scrolling it into view alone pushes that sentence off the top, so the sentence is
  // brought back to the top of the screen with the panel under it.
  function showBesideFlagged(panel) {
    panel.scrollIntoView({ block: "nearest" });
    var flagged = document.getElementById("latest");
    if (!flagged) return;
    var box = flagged.getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) flagged.scrollIntoView({ block: "start" });
  }

  // The buttons the panel stands in for ("Still human", "A machine wrote this one") are hidden
  // while it is open, so that a tap or a key cannot answer the round past it, and only one
  // "How sure are you?" shows; a sureness already picked there goes with the panel's answer.
  function openPanelFrom(opener, panel) {
    delete opener.dataset.busy;
    var choices = opener.closest(".decide");
    var picked = choices && choices.querySelector("input[name=confidence]:checked");
    if (picked) {
      var same = panel.querySelector('input[name=confidence][value="' + picked.value + '"]');
      if (same) same.checked = true;
    }
    if (choices) choices.hidden = true;
    panel.dataset.closable = "1";
    panel.hidden = false;
    showBesideFlagged(panel);
    var chip = panel.querySelector("input[type=checkbox]");
    if (chip) chip.focus({ preventScroll: true });
  }

  function closePanel(panel) {
    panel.hidden = true;
    var back = document.querySelector('[data-opens="' + panel.id + '"]');
    if (!back) return;
    var choices = back.closest(".decide");
    if (choices) choices.hidden = false;
    back.focus();
  }

  document.addEventListener("click", function (event) {
    var opener = event.target.closest && event.target.closest("[data-opens]");
    if (opener) {
      var panel = document.getElementById(opener.dataset.opens);
      if (!panel) return;
      event.preventDefault();
      openPanelFrom(opener, panel);
      return;
    }
    var closer = event.target.closest && event.target.closest("[data-closes]");
    if (closer) {
      var shut = document.getElementById(closer.dataset.closes);
      if (!shut || shut.hidden === undefined) return;
      event.preventDefault();
      closePanel(shut);
    }
  });

  // A "machine" answer without a reason gets a gentle prompt instead of a round trip.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("form.why button[type=submit]");
    if (!button) return;
    event.preventDefault();
    submitWhy(button.form);
  });

  window.addEventListener("load", function () {
    var latest = document.getElementById("latest");
    if (latest && location.hash === "#latest") latest.focus({ preventScroll: false });
    var why = document.getElementById("why");
    if (why && !why.hidden && location.hash === "#why") {
      var first = why.querySelector("input[type=checkbox]");
      if (first) first.focus();
    }
    var round = document.getElementById("round");
    if (round && round.dataset.state === "answered" && location.hash === "#result") {
      placeFocus(round);
    }
  });
})();

// Copy buttons: <button data-copy="ID"> copies the text of the element with that id.
document.addEventListener("click", function (event) {
  var button = event.target.closest && event.target.closest("[data-copy]");
  if (!button) return;
  var source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText(source.textContent.trim()).then(function () {
    button.textContent = "Copied";
  });
});
