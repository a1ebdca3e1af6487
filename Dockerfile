# The console's image: web (gunicorn), worker, beat and one-shot commands (docker-compose.yml).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml ./
COPY console console
COPY collectors collectors
COPY inventory inventory
COPY advisor advisor
COPY devenv devenv
COPY templates templates
COPY static static
COPY manage.py ./
# gunicorn serves the web console in the image (development uses runserver, so it is not a package dependency).
RUN pip install --no-cache-dir -e . gunicorn==27.0.1
# Hashed, compressed static files, served by WhiteNoise from the app server. Loading the settings outside
# DEBUG needs real keys: throwaway ones, for this step only (containers get theirs from the env file).
RUN set -a && python console/keys.py /tmp/build-keys.env && . /tmp/build-keys.env \
    && python manage.py collectstatic --noinput -v0 && rm /tmp/build-keys.env
RUN useradd --system --no-create-home --uid 10001 pgconsole
USER pgconsole
EXPOSE 8000
