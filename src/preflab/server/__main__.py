"""``python -m preflab.server serve --db URL ...`` (and ``user create``) without the main CLI."""

from .cli import serve_app

serve_app()
