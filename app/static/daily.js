// Around the daily challenge: the countdown to the next one, the share button, and the opt-in
// reminder. Every page works without this script; it only adds to them.
(function () {
  "use strict";
  if (window.roftDaily) return; // loaded twice (a daily page of a player with the reminder on)
  window.roftDaily = true;

  var MINUTE = 60 * 1000;

  // "5 h 12 min", as app/game/countdown.py says it.
  function words(minutes) {
    if (minutes <= 1) return "less than a minute";
    var hours = Math.floor(minutes / 60);
    var rest = minutes % 60;
    if (!hours) return rest + " min";
    return rest ? hours + " h " + rest + " min" : hours + " h";
  }

  function minutesUntil(when) {
    return Math.ceil((when - Date.now()) / MINUTE);
  }

  // The countdown: updated once a minute (it is not a live region, so it never interrupts a
  // screen reader); once the time has come, a link to the new challenge.
  function startCountdown(box) {
    var when = Date.parse(box.dataset.next);
    var time = box.querySelector("time");
    if (!time || isNaN(when)) return;
    function update() {
      var left = minutesUntil(when);
      if (left <= 0) {
        box.textContent = "A new challenge is out: ";
        var link = document.createElement("a");
        link.href = box.dataset.dailyUrl || "/daily";
        link.textContent = "play today's challenge";
        box.appendChild(link);
        box.appendChild(document.createTextNode("."));
        return false;
      }
      time.textContent = words(left);
      time.setAttribute("datetime", "PT" + Math.floor(left / 60) + "H" + (left % 60) + "M");
      return true;
    }
    if (update()) {
      var timer = setInterval(function () {
        if (!update()) clearInterval(timer);
      }, MINUTE);
    }
  }

  // Share: the system share sheet where the browser has one, else the clipboard. The text is the
  // page's share text (app/game/daily.py: share_text); its last line is the card's address.
  function copyText(text, source) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {
      var range = document.createRange();
      range.selectNodeContents(source);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      var done = false;
      try {
        done = document.execCommand("copy");
      } catch (error) {
        done = false;
      }
      selection.removeAllRanges();
      if (done) resolve();
      else reject(new Error("copy refused"));
    });
  }

  function setupShare(button) {
    var source = document.getElementById(button.dataset.share);
    var status = document.getElementById("share-status");
    if (!source) return;
    var actions = button.closest("[data-share-actions]");
    if (actions) actions.hidden = false;
    function say(message) {
      if (!status) return;
      // Cleared first, so that saying the same thing twice is announced twice.
      status.textContent = "";
      setTimeout(function () {
        status.textContent = message;
      }, 50);
    }
    function copy(text) {
      copyText(text, source).then(
        function () {
          say("Copied to the clipboard: paste it anywhere to share.");
        },
        function () {
          say("Your browser did not allow copying: select the text above and copy it.");
        }
      );
    }
    button.addEventListener("click", function () {
      var text = source.textContent.trim();
      var lines = text.split("\n");
      var url = lines.length > 1 ? lines[lines.length - 1] : "";
      var data = { title: "Real or Fake Text", text: lines.slice(0, -1).join("\n"), url: url };
      if (navigator.share && (!navigator.canShare || navigator.canShare(data))) {
        navigator.share(data).then(
          function () {
            say("Shared.");
          },
          function (error) {
            if (error && error.name === "AbortError") return; // the player closed the sheet
            copy(text);
          }
        );
      } else {
        copy(text);
      }
    });
  }

  // The reminder offer: shown only where the browser has notifications. Turning it on asks for
  // permission first; the choice is stored only once the browser allows notifications.
  function setupReminderOffer(section) {
    if (!("Notification" in window)) return;
    section.hidden = false;
    var form = section.querySelector("[data-reminder-form]");
    var status = section.querySelector("[data-reminder-status]");
    if (!form) return;
    form.addEventListener("submit", function (event) {
      if (Notification.permission === "granted") return; // stored by the plain post
      event.preventDefault();
      var asked = Notification.requestPermission(function () {});
      Promise.resolve(asked).then(function (answer) {
        answer = answer || Notification.permission;
        if (answer === "granted") {
          form.submit();
        } else if (status) {
          status.textContent =
            answer === "denied"
              ? "Your browser blocks notifications from this site, so no reminder is set. You can allow them in the browser's site settings and try again."
              : "No reminder set: the browser did not allow notifications.";
        }
      });
    });
  }

  // With the reminder on: say when this browser does not let the site notify, and offer to ask.
  function setupPermissionCheck(box) {
    var text = box.querySelector("[data-reminder-permission-text]");
    var allow = box.querySelector("[data-reminder-allow]");
    function show() {
      var state = "Notification" in window ? Notification.permission : "missing";
      box.hidden = state === "granted";
      if (allow) allow.hidden = state !== "default";
      if (!text) return;
      if (state === "missing") {
        text.textContent = "This browser cannot show notifications, so it will not remind you.";
      } else if (state === "denied") {
        text.textContent =
          "This browser blocks notifications from this site: allow them in its site settings to be reminded here.";
      } else if (state === "default") {
        text.textContent = "This browser has not been allowed to show notifications yet.";
      }
    }
    if (allow) {
      allow.addEventListener("click", function () {
        Promise.resolve(Notification.requestPermission(function () {})).then(show);
      });
    }
    show();
  }

  // The opted-in reminder: while this tab is open, a notification when the next challenge is
  // out (checked once a minute, so a computer that slept catches up). One per day across tabs.
  function startReminder(meta) {
    if (!("Notification" in window) || Notification.permission !== "granted") return;
    var when = Date.parse(meta.content);
    var dailyUrl = meta.dataset.dailyUrl || "/daily";
    if (isNaN(when)) return;
    var timer = setInterval(function () {
      if (Date.now() < when) return;
      clearInterval(timer);
      var day = new Date(when).toISOString().slice(0, 10);
      var key = "roft-daily-notified";
      try {
        if (localStorage.getItem(key) === day) return; // another tab has told them already
        localStorage.setItem(key, day);
      } catch (error) {
        // No storage: every open tab may notify; the tag below folds them into one.
      }
      var note = new Notification("A new Real or Fake Text challenge is out", {
        body: "Today's texts are waiting. Keep your streak going!",
        tag: "roft-daily-" + day,
      });
      note.onclick = function () {
        window.focus();
        window.location.href = dailyUrl;
        note.close();
      };
    }, MINUTE);
  }

  function init() {
    document.querySelectorAll("[data-countdown]").forEach(startCountdown);
    document.querySelectorAll("[data-share]").forEach(setupShare);
    document.querySelectorAll("[data-reminder-offer]").forEach(setupReminderOffer);
    document.querySelectorAll("[data-reminder-permission]").forEach(setupPermissionCheck);
    var meta = document.querySelector('meta[name="roft-daily-reminder"]');
    if (meta) startReminder(meta);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
