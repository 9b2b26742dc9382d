// tekrar console: show every <time> in the operator's own zone; the UTC instant stays in
// the title, shown on hover. Runs again after each htmx swap.
(function () {
  function localise(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (!isNaN(d)) el.textContent = d.toLocaleString();
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localise(document); });
  document.addEventListener("htmx:afterSwap", function (e) { localise(e.target); });
})();
