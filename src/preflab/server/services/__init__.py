"""The server's services: one module per concept, called by the REST routes, the pages and
the CLI alike (a route or page parses, calls a service, shapes the answer).

``leases`` (assignment: the rater's next item, leases, release), ``skips`` (why no item;
skipping and flagging a task), ``submissions`` (the submit flow's session steps: replays, the
rater row), ``results`` (a stored judgment's answer to its rater), ``gold_scoring`` (gold
outcomes, qualification, drift suspension, the background scorer), ``revisions`` (send back,
revise, and a rater's edit of their own label, one transaction each), ``review`` (the review
queue, adjudication, exclusion, quality figures), ``projects`` (create, settings, import,
export), ``files`` (uploaded item and rubric files), ``queries`` (read models for the JSON and
the pages), ``browse`` (the data browser). Their errors are :mod:`preflab.server.errors`.
"""
