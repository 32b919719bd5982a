/* Starts Swagger UI on /api/v1/docs from local assets (a file, not an inline script, so the
   page keeps script-src 'self'). validatorUrl null: no badge fetched from swagger.io. */
(function () {
  "use strict";
  const root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapi,
    dom_id: "#swagger-ui",
    validatorUrl: null,
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
})();
