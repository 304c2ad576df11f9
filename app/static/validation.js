// Labelling comments from the keyboard: keys 1 to 0 choose the matching label's button.
document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const target = event.target;
  if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA")) return;
  const button = document.querySelector(`#validation-form button[data-key="${event.key}"]`);
  if (button) {
    event.preventDefault();
    button.click();
  }
});
document.documentElement.dataset.labelKeys = "ready";
