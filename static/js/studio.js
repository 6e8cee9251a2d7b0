// Progressive enhancements shared by every studio page. Served as a static file (the CSP
// allows no inline script); everything is delegated on `document`, so it keeps working
// after htmx swaps and needs no per-page set-up. Without JavaScript the pages still work:
// the menu is simply always open (it wraps on a phone) and wide tables scroll.
(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.add("js");

  function setMenu(toggle, open) {
    var menu = document.getElementById(toggle.getAttribute("aria-controls"));
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    if (menu) menu.classList.toggle("open", open);
  }

  // The phone menu: a disclosure button (WAI-ARIA disclosure pattern); Esc folds it again.
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest && event.target.closest(".nav-toggle");
    if (toggle) setMenu(toggle, toggle.getAttribute("aria-expanded") !== "true");
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var toggle = document.querySelector(".nav-toggle[aria-expanded=true]");
    if (toggle && toggle.offsetParent !== null) {
      setMenu(toggle, false);
      toggle.focus();
    }
  });

  // A box that scrolls (a wide table on a phone, a long diff) must be reachable by keyboard
  // to be scrolled: give it a tab stop when it overflows and holds nothing focusable itself.
  var SCROLLERS = "table.table, pre, .chart-box";
  var FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";
  function scrolls(el) {
    var style = window.getComputedStyle(el);
    var x = /auto|scroll/.test(style.overflowX) && el.scrollWidth > el.clientWidth + 1;
    var y = /auto|scroll/.test(style.overflowY) && el.scrollHeight > el.clientHeight + 1;
    return x || y;
  }
  function markScrollers() {
    document.querySelectorAll(SCROLLERS).forEach(function (el) {
      var marked = el.getAttribute("data-scroll-stop") === "1";
      if (scrolls(el) && (marked || !el.querySelector(FOCUSABLE))) {
        el.setAttribute("tabindex", "0");
        el.setAttribute("data-scroll-stop", "1");
      } else if (marked) {
        el.removeAttribute("tabindex");
        el.removeAttribute("data-scroll-stop");
      }
    });
  }
  // Text areas inside `[data-autosize]` grow with their text. CSS `field-sizing: content`
  // does it where supported (studio.css); elsewhere the height follows the scroll height.
  var fieldSizing = window.CSS && CSS.supports && CSS.supports("field-sizing", "content");
  function autosize(area) {
    area.style.height = "auto";
    area.style.height = area.scrollHeight + 2 + "px";
  }
  if (!fieldSizing) {
    document.addEventListener("input", function (event) {
      if (event.target.matches && event.target.matches("[data-autosize] textarea")) autosize(event.target);
    });
    var sizeAll = function () { document.querySelectorAll("[data-autosize] textarea").forEach(autosize); };
    document.addEventListener("DOMContentLoaded", sizeAll);
    document.addEventListener("htmx:afterSettle", sizeAll);
  }

  // Focus after an htmx answer: when it replaced the control that had the focus, the focus would
  // fall to <body> and a keyboard user would start again from the top. A form may name where it
  // goes (`data-focus-after`, a selector: the inline Add an entry form goes back to its title);
  // otherwise the answer's message (a status or an alert), else its first control, else the
  // swapped element itself. Runs after settling, so the story view's own rules (static/js/play.js,
  // on swap) have placed the focus first.
  var FOCUSABLE_FIRST = "[role=alert], [role=status], a[href], button:not([disabled]), input:not([type=hidden]), select, textarea, summary";
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.xhr) event.detail.xhr.focusBefore = document.activeElement;
  });
  function focusLost(xhr) {
    // Only a focus this answer took away: a page nobody has focused yet is left alone (polling).
    var before = xhr && xhr.focusBefore;
    var active = document.activeElement;
    var taken = before && before !== document.body && !document.body.contains(before);
    return taken && (!active || active === document.body || !document.body.contains(active));
  }
  document.addEventListener("htmx:afterSettle", function (event) {
    var origin = event.detail.requestConfig && event.detail.requestConfig.elt;
    var named = origin && origin.closest && origin.closest("[data-focus-after]");
    var place = named ? document.querySelector(named.getAttribute("data-focus-after")) : null;
    if (!place && !focusLost(event.detail.xhr)) return;
    if (!place) {
      var swapped = event.detail.target;
      if (swapped && !document.body.contains(swapped) && swapped.id) swapped = document.getElementById(swapped.id);
      if (!swapped || !document.body.contains(swapped)) return;
      place = swapped.querySelector(FOCUSABLE_FIRST) || swapped;
    }
    if (!place.matches("a[href], button, input, select, textarea, summary") && !place.hasAttribute("tabindex")) {
      place.setAttribute("tabindex", "-1");  // a message or a container takes the focus without entering the tab order
    }
    place.focus();
  });

  document.addEventListener("DOMContentLoaded", markScrollers);
  window.addEventListener("load", markScrollers);
  document.addEventListener("htmx:afterSettle", markScrollers);
  window.addEventListener("resize", markScrollers);
})();
