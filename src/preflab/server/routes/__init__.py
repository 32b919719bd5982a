"""The REST API's routes, one module per concern (``labelling``: next task, submit, release,
skip — the two hot ones also served by :mod:`preflab.server.fastlane`)."""
