// How an explanation was entered, sent with the answer as three hidden fields (see
// app/game/typing_signals.py): typing_pasted ("1" once text is pasted or dropped into the box),
// typing_ms (first keystroke in the box to the answer) and typing_chars (characters typed, pasted
// ones not counted). Only signals for a study runner to look into; the answer works without them.
(function () {
  "use strict";
  var BOX = "form.why textarea[name=explanation]";
  var state = new WeakMap();

  function field(form, name) {
    var input = form.querySelector('input[type=hidden][name="' + name + '"]');
    if (!input) {
      input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      form.appendChild(input);
    }
    return input;
  }

  function track(box) {
    var seen = state.get(box);
    if (!seen) {
      seen = { pasted: false, started: null, typed: 0, length: box.value.length };
      state.set(box, seen);
    }
    return seen;
  }

  function write(form, seen) {
    field(form, "typing_pasted").value = seen.pasted ? "1" : "0";
    field(form, "typing_chars").value = String(seen.typed);
    field(form, "typing_ms").value =
      seen.started === null ? "" : String(Math.max(0, Math.round(performance.now() - seen.started)));
  }

  function box(event) {
    var target = event.target;
    return target && target.matches && target.matches(BOX) ? target : null;
  }

  document.addEventListener("keydown", function (event) {
    var found = box(event);
    if (!found) return;
    var seen = track(found);
    if (seen.started === null && !event.ctrlKey && !event.metaKey) seen.started = performance.now();
  }, true);

  document.addEventListener("paste", function (event) {
    var found = box(event);
    if (!found) return;
    track(found).pasted = true;
    write(found.form, track(found));
  }, true);

  document.addEventListener("drop", function (event) {
    var found = box(event);
    if (!found) return;
    track(found).pasted = true;
  }, true);

  document.addEventListener("input", function (event) {
    var found = box(event);
    if (!found) return;
    var seen = track(found);
    var kind = event.inputType || "";
    var grown = found.value.length - seen.length;
    seen.length = found.value.length;
    if (kind === "insertFromPaste" || kind === "insertFromDrop" || kind === "insertFromPasteAsQuotation") {
      seen.pasted = true;
    } else if (grown > 0 && kind.indexOf("insert") === 0) {
      // Touch keyboards may type without a keydown per key: the first growth starts the clock.
      if (seen.started === null) seen.started = performance.now();
      seen.typed += grown;
    }
    write(found.form, seen);
  }, true);

  // Before the page's own submit handler reads the form: the time up to this answer.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var words = form && form.matches && form.matches("form.why")
      ? form.querySelector("textarea[name=explanation]") : null;
    // Untouched (e.g. filled in again by the server after an error): nothing to report.
    if (words && state.get(words)) write(form, state.get(words));
  }, true);
})();
