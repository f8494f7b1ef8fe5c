// The operator console's only script of its own (htmx aside). No inline script is
// allowed by the console's Content-Security-Policy, so behaviour lives here.
(function () {
  "use strict";

  // Live regions poll every 10 s, but only while the page is visible: a hidden tab
  // sends nothing, and a tab that becomes visible again refreshes at once.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (document.hidden && elt && elt.hasAttribute("data-live")) {
      event.preventDefault();
    }
  });
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) {
      document.body.dispatchEvent(new CustomEvent("console:visible"));
    }
  });

  // A poll answered with the login page means the session ended: go there.
  document.addEventListener("htmx:afterRequest", function (event) {
    var xhr = event.detail && event.detail.xhr;
    if (xhr && xhr.responseURL && xhr.responseURL.indexOf("/console/login") !== -1) {
      window.location.assign("/console/login");
    }
  });

  // Forms that change something ask first when they carry data-confirm.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form && form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });
})();
