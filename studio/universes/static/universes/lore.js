// The Lore Book's and the Metadata page's table scripts. Loaded as a static file (the CSP
// allows no inline script); every handler is delegated on `document`, so it keeps working
// after htmx swaps. Without JavaScript the pages still work: Edit opens the full edit page.

// "Select all" for the Lore Book's bulk actions.
document.addEventListener("change", function (event) {
  var box = event.target;
  if (!box.matches || !box.matches("input[data-select-all]")) return;
  var name = box.getAttribute("data-select-all");
  document.querySelectorAll('input[type=checkbox][name="' + name + '"]').forEach(function (other) {
    other.checked = box.checked;
  });
});

// Inline row editing, by keyboard as well as by mouse. A row of a `[data-inline-rows]` table
// becomes an editor (`tr.editing`) on Edit (`[data-inline-edit]`) and goes back on Save
// (`[data-inline-save]`) or Cancel (`[data-inline-cancel]`). htmx replaces the row, which
// would drop focus to <body>; so:
// - on Edit, focus moves to the editor's first field;
// - after Save or Cancel, focus goes back to the row's Edit link (after a Save the server
//   refused, to the first field in error instead);
// - after a Delete, to the next row's Edit link (or the previous row's);
// - in the editor, Enter in a one-line field saves, Ctrl/Cmd+Enter saves from anywhere
//   (Enter in a text area is a new line), and Esc cancels.
(function () {
  "use strict";
  var FIELDS = "input:not([type=hidden]):not([disabled]), select:not([disabled]), textarea:not([disabled])";
  var pending = null; // {rowId, fallbackIds} of the row whose request is in flight

  function inlineRow(element) {
    var row = element && element.closest && element.closest("tr");
    return row && row.id && row.closest("[data-inline-rows]") ? row : null;
  }

  function focusRow(row) {
    if (row.classList.contains("editing")) {
      var invalid = row.querySelector("[aria-invalid=true]");
      // Someone who already moved into a field of the editor (a click, or Tab, before the
      // row settled) keeps their place: stealing focus mid-typing would split their text.
      var active = document.activeElement;
      if (!invalid && active && active !== row && row.contains(active) && active.matches(FIELDS)) return;
      var target = invalid || row.querySelector(FIELDS);
      if (target) target.focus();
      return;
    }
    var edit = row.querySelector("[data-inline-edit]") || row.querySelector("a[href], button");
    if (edit) {
      edit.focus();
    } else {
      row.setAttribute("tabindex", "-1");
      row.focus();
    }
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var row = inlineRow(event.detail.elt);
    if (!row) return;
    var siblings = [row.nextElementSibling, row.previousElementSibling];
    pending = {
      xhr: event.detail.xhr,
      rowId: row.id,
      fallbackIds: siblings.filter(function (s) { return s && s.id; }).map(function (s) { return s.id; }),
    };
  });

  document.addEventListener("htmx:afterSettle", function (event) {
    // Only the swap of the row's own request: the embedding poller settles in between.
    if (!pending || event.detail.xhr !== pending.xhr) return;
    var wanted = pending;
    pending = null;
    var row = document.getElementById(wanted.rowId);
    if (row) {
      focusRow(row);
      return;
    }
    for (var i = 0; i < wanted.fallbackIds.length; i++) {
      var other = document.getElementById(wanted.fallbackIds[i]);
      if (other) {
        focusRow(other);
        return;
      }
    }
  });

  // htmx binds a swapped-in row's buttons only when it settles (20 ms later, longer on a
  // busy machine; the row carries `htmx-added` until then), and htmx itself puts focus back
  // on a field with the same id at once. A key pressed in between would click a button that
  // does nothing yet, so the click waits for the row to settle.
  function clickWhenBound(button, tries) {
    if (button.closest(".htmx-added") && tries < 200) {
      window.setTimeout(function () { clickWhenBound(button, tries + 1); }, 10);
      return;
    }
    if (button.isConnected) button.click();
  }

  document.addEventListener("keydown", function (event) {
    var row = inlineRow(event.target);
    if (!row || !row.classList.contains("editing")) return;
    var field = event.target;
    if (event.key === "Escape") {
      var cancel = row.querySelector("[data-inline-cancel]");
      if (cancel) {
        event.preventDefault();
        clickWhenBound(cancel, 0);
      }
      return;
    }
    if (event.key !== "Enter" || event.isComposing) return;
    var oneLine = field.tagName === "INPUT" && !/^(checkbox|radio|button|submit|reset|file)$/.test(field.type);
    if (oneLine || event.ctrlKey || event.metaKey) {
      var save = row.querySelector("[data-inline-save]");
      if (save) {
        event.preventDefault();
        clickWhenBound(save, 0);
      }
    }
  });
})();
