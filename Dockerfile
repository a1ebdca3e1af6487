FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml ./
COPY console console
COPY collectors collectors
COPY advisor advisor
COPY devenv devenv
COPY templates templates
COPY static static
COPY manage.py ./
RUN pip install --no-cache-dir -e .
EXPOSE 8000
