# The console's image: web (gunicorn), worker, beat and one-shot commands (docker-compose.yml).
# Bookworm, as on the development machines, so the Debian package names below are the ones tests/test_image.py
# checks against what the app really loads there.
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# WeasyPrint (audit PDFs) loads Pango with its fontconfig/FreeType backend (HarfBuzz, GLib come with it) and
# HarfBuzz's subsetter, which embeds only the glyphs a PDF uses; the PDF, the mail and the charts ask for DejaVu.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libpango-1.0-0 \
        libpangoft2-1.0-0 \
        libharfbuzz-subset0 \
        fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/*
# The user the containers run as. Its home is its own: libpq looks for ~/.postgresql/root.crt (sslmode=verify-*),
# matplotlib and fontconfig keep their caches there, gunicorn its control socket (~/.gunicorn/gunicorn.ctl).
# Audit bundles go to a folder it owns, outside /app (root's): docker-compose.yml mounts the volume `exports`
# there in web and worker, and a new named volume starts as a copy of this folder, ownership included.
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/pgconsole pgconsole \
    && install -d -o pgconsole -g pgconsole -m 0750 /var/lib/pgconsole/exports
ENV EXPORT_ROOT=/var/lib/pgconsole/exports
WORKDIR /app
# The dependencies first, from the lock alone, in layers of their own: rebuilt when the lock changes, not at every
# change of the source. As make install does it (its Makefile says why): the installer pinned with its hashes in
# place of the base image's pip, then every locked package with its hashes and without resolving a dependency
# (--no-deps: a release published after the lock is never chosen), then pip check.
# pyphen (WeasyPrint's hyphenation) is LGPL or MPL at our choice, but four of its dictionaries are GPL alone: they
# go in the same layer, so nothing GPL-only ships (pgconsole never hyphenates; make licenses, devenv/licenses.py).
COPY requirements/installer.txt requirements/installer.txt
COPY requirements/runtime.txt requirements/runtime.txt
RUN pip install --no-cache-dir --require-hashes --no-deps -r requirements/installer.txt \
    && pip install --no-cache-dir --require-hashes --no-deps -r requirements/runtime.txt \
    && pip check \
    && cd "$(python -c 'import os, pyphen; print(os.path.dirname(pyphen.__file__))')/dictionaries" \
    && rm hyph_ca.dic hyph_kn_IN.dic hyph_ro_RO.dic hyph_te_IN.dic
# The whole build context, so a new app cannot be forgotten; .dockerignore keeps out what is not the product.
COPY . .
# Editable: settings.py finds templates/ and static/ next to the source (BASE_DIR), not in site-packages.
# Nothing else comes with it: no dependency (all are installed above), no isolated build environment (setuptools,
# the build backend, is in the lock).
RUN pip install --no-cache-dir --no-deps --no-build-isolation --check-build-dependencies -e .
# Hashed, compressed static files, served by WhiteNoise from the app server. Loading the settings outside
# DEBUG needs real keys: throwaway ones, for this step only (containers get theirs from the env file).
RUN set -a && python console/keys.py /tmp/build-keys.env && . /tmp/build-keys.env \
    && python manage.py collectstatic --noinput -v0 && rm /tmp/build-keys.env
# Set only now: the build steps above run as root and must leave nothing of root's in the user's home.
ENV HOME=/home/pgconsole
USER pgconsole
EXPOSE 8000
