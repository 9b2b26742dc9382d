// tekrar console: tell the server the operator's time zone. The server shows every time in
// it, labelled with its name (the UTC instant in the title, shown on hover), and reads the
// times typed in the search forms in it: one zone on the whole page. The zone goes in a
// cookie; a page rendered in another zone is loaded again, once.
(function () {
  var zone;
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { return; }
  if (!zone) return;
  document.cookie = "tekrar_tz=" + encodeURIComponent(zone) + "; path=/admin; max-age=31536000; samesite=strict";
  function check() {
    var shown = document.body && document.body.getAttribute("data-zone");
    if (!shown || shown === zone) return;
    // A page without times (the sign-in page) is not loaded again: the cookie is set for the next.
    if (!document.querySelector("time, input[type=datetime-local], svg")) return;
    // Reload once per zone: if the server cannot use this zone it stays in UTC, labelled.
    var tried = "tekrar_tz_reloaded";
    try {
      if (sessionStorage.getItem(tried) === zone) return;
      sessionStorage.setItem(tried, zone);
    } catch (e) { return; }
    // A GET of the same address: never a form posted again.
    if (document.cookie.indexOf("tekrar_tz=") >= 0) location.replace(location.href);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", check);
  } else {
    check();
  }
})();

// On a phone the tables stack each row's cells (see the CSS): each cell gets its column's
// heading as data-label, which the CSS shows before it. Runs again after each htmx swap.
(function () {
  function label(root) {
    root.querySelectorAll("table").forEach(function (table) {
      var heads = table.querySelectorAll("thead th");
      if (!heads.length) return;
      table.querySelectorAll("tbody tr").forEach(function (tr) {
        Array.prototype.forEach.call(tr.children, function (td, i) {
          if (heads[i] && !td.hasAttribute("data-label")) td.setAttribute("data-label", heads[i].textContent.trim());
        });
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { label(document); });
  } else {
    label(document);
  }
  document.addEventListener("htmx:afterSwap", function (e) { label(e.target); });
})();
