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

  document.addEventListener("DOMContentLoaded", markScrollers);
  window.addEventListener("load", markScrollers);
  document.addEventListener("htmx:afterSettle", markScrollers);
  window.addEventListener("resize", markScrollers);
})();
