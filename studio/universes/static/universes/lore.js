// "Select all" for the Lore Book's bulk actions. Loaded as a static file (the CSP allows
// no inline script); delegated on document so it keeps working after htmx swaps.
document.addEventListener("change", function (event) {
  var box = event.target;
  if (!box.matches || !box.matches("input[data-select-all]")) return;
  var name = box.getAttribute("data-select-all");
  document.querySelectorAll('input[type=checkbox][name="' + name + '"]').forEach(function (other) {
    other.checked = box.checked;
  });
});
