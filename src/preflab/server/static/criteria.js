/* The label page's checklist widget for the ``criteria`` kind (templates/_criteria.html).
   app.js looks a kind up in window.preflabWidgets when it has no widget of its own. */
(function () {
  "use strict";
  const widgets = (window.preflabWidgets = window.preflabWidgets || {});
  widgets.criteria = {
    init(root, initial) {
      const box = root.querySelector("#criteria");
      if (box && initial && initial.met) {
        for (const input of box.querySelectorAll('input[name="criterion"]')) {
          input.checked = initial.met[input.value] === true;
        }
      }
      return null;
    },
    read(root) {
      const box = root.querySelector("#criteria");
      if (!box) return { error: "this item has no approved criteria to grade" };
      const met = {};
      for (const input of box.querySelectorAll('input[name="criterion"]')) met[input.value] = input.checked;
      return { body: { kind: "criteria", candidate_id: box.dataset.candidate,
                       criteria_version: +box.dataset.version, met } };
    },
  };
})();
