"""manage.py demo — private monitored PostgreSQL servers with workloads, a celery worker and beat
collecting them, and the web server; Ctrl-C (or SIGTERM, or --duration) stops everything.

The non-Django parts (clusters, workloads, child processes) are in devenv/demo.py. A development command: it
exists where devenv is an installed app, which the settings make it in DEBUG only (never in the image's
production processes).
"""

import os
import secrets
import signal
import sys
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection
from django.db.models import Count
from django.utils import timezone

from alerts import signing
from devenv import demo
from devenv.errors import ClusterError
from devenv.mailsink import MailSink
from devenv.webhooksink import WebhookSink

STATUS_EVERY_S = 15.0
ADMIN_USER = "admin"
ADMIN_EMAIL = "admin@demo.example"


class _Stop(Exception):
    """A signal arrived during start-up: go straight to the shutdown."""


def _fmt_elapsed(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}:{s:02d}"


def _env_prefix() -> str:
    """``DATABASE_URL=... `` to repeat before the suggested commands when it is set (password hidden)."""
    from urllib.parse import urlsplit, urlunsplit

    url = os.environ.get("DATABASE_URL")
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        url = urlunsplit(parts._replace(netloc=netloc))
    return f"DATABASE_URL='{url}' "


def _ended(rc: int | None) -> str:
    if rc is None:
        return "killed (did not stop in time)"
    return "stopped" if rc in (0, -signal.SIGTERM) else f"exited with code {rc}"


def _rate(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


class Command(BaseCommand):
    help = (
        "Run the demo: two monitored PostgreSQL servers (16 and 18) with workloads reproducing "
        "public cases, a celery worker and beat collecting them every 15 s, and the web server "
        "on 127.0.0.1:8000. Ctrl-C stops everything."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--duration",
            type=float,
            default=None,
            metavar="SECONDS",
            help="stop after SECONDS once everything is up (default: until Ctrl-C)",
        )
        parser.add_argument("--no-web", action="store_true", help="do not start the web server")
        parser.add_argument("--web-port", type=int, default=8000, help="web server port (default 8000)")
        parser.add_argument(
            "--fresh", action="store_true", help="re-create the demo clusters (their data directories are wiped)"
        )
        parser.add_argument("--scale", type=float, default=1.0, help="multiply every workload's rate (default 1.0)")

    # ---- output ------------------------------------------------------------------

    def say(self, text: str = "", style=None) -> None:
        self.stdout.write(style(text) if style else text)
        self.stdout.flush()

    # ---- main --------------------------------------------------------------------

    def handle(self, *args, duration, no_web, web_port, fresh, scale, **opts):
        if duration is not None and duration <= 0:
            raise CommandError("--duration must be positive")
        if scale <= 0:
            raise CommandError("--scale must be positive")
        self.stop = threading.Event()
        self.reason = ""
        self.mail_sink: MailSink | None = None
        self.webhook_sink: WebhookSink | None = None
        self.organization_id: int | None = None
        self.admin_email = ADMIN_EMAIL
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            with demo.demo_lock():
                failure = self._run(duration=duration, web=not no_web, web_port=web_port, fresh=fresh, scale=scale)
        except demo.DemoBusy as exc:
            raise CommandError(str(exc)) from exc
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if failure:
            raise CommandError(failure)

    def _on_signal(self, signum, frame) -> None:
        if self.stop.is_set():
            # os.write: a buffered write could be re-entered (the signal may interrupt one).
            os.write(2, f"{signal.Signals(signum).name}: already stopping, please wait\n".encode())
            return
        self.reason = signal.Signals(signum).name
        self.stop.set()

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise _Stop

    def _run(self, *, duration, web, web_port, fresh, scale) -> str:
        """Start everything, wait, stop everything; returns a failure message or ''."""
        t_start = time.monotonic()
        self._migrate()
        if web and demo.port_open(web_port):
            raise CommandError(f"port {web_port} is already in use: stop what listens there or pass --web-port")
        if self.stop.is_set():
            return ""
        self.say(f"starting the demo clusters (PostgreSQL {', '.join(str(s.major) for s in demo.SERVERS)})...")
        try:
            clusters = demo.start_clusters(fresh=fresh)
        except ClusterError as exc:
            raise CommandError(str(exc)) from exc
        workloads = demo.WorkloadSet(clusters, scale=scale)
        children = demo.Children()
        failure = ""
        try:
            self._check_stop()
            servers = self._register(clusters)
            password = self._admin()
            self._start_mail_sink()
            self._start_webhook_sink()
            self._alerting()
            self._check_stop()
            failure = self._start_children(children, web=web, web_port=web_port)
            if failure:
                self.reason = failure
                return failure
            self._check_stop()
            workloads.start()
            self._banner(clusters, servers, password, web=web, web_port=web_port, startup_s=time.monotonic() - t_start)
            failure = self._wait(duration, children, workloads, servers)
        except _Stop:
            pass
        finally:
            self._shutdown(clusters, workloads, children)
        return failure

    # ---- start-up ----------------------------------------------------------------

    def _migrate(self) -> None:
        from django.db.migrations.executor import MigrationExecutor

        db = connection.settings_dict
        where = f"{db.get('USER') or ''}@{db.get('HOST') or 'localhost'}:{db.get('PORT') or 5432}/{db.get('NAME')}"
        try:
            executor = MigrationExecutor(connection)
            pending = len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
            call_command("migrate", interactive=False, verbosity=0)
        except DatabaseError as exc:
            raise CommandError(
                f"the history store {where} is not usable: {str(exc).strip()}\n"
                "start it with `.venv/bin/python -m devenv up-history` (or `make services`), "
                "or set DATABASE_URL"
            ) from exc
        self.say(f"history store {where}: " + (f"{pending} migrations applied" if pending else "migrations up to date"))

    def _register(self, clusters) -> dict:
        """Register the demo servers (organization "demo") or bring their registration in line."""
        from inventory.connection import parse_dsn
        from inventory.crypto import CredentialsError
        from inventory.models import Server
        from inventory.services import server_create

        out = {}
        for spec in demo.SERVERS:
            c = clusters[spec.name]
            dsn = demo.monitor_dsn(c)
            server = Server.objects.filter(organization__name=demo.ORGANIZATION, name=spec.name).first()
            if server is None:
                try:
                    server = server_create(
                        name=spec.name,
                        connection=parse_dsn(dsn),
                        organization_name=demo.ORGANIZATION,
                        interval_s=demo.interval_s(),
                        cpu_count=os.cpu_count(),
                        tags=["demo"],
                    )
                except ValidationError as exc:
                    raise CommandError(f"cannot register {spec.name}: {'; '.join(exc.messages)}") from exc
                self.say(f"registered {demo.ORGANIZATION}/{spec.name} (every {server.interval_s}s)")
            else:
                wanted = {"host": "127.0.0.1", "port": c.port, "database": demo.APP_DB, "user": demo.MONITOR_USER}
                try:
                    same_password = server.get_password() == demo.MONITOR_PASSWORD
                except CredentialsError:
                    same_password = False
                changed = [k for k, v in wanted.items() if getattr(server, k) != v]
                if changed or not same_password:
                    for k, v in wanted.items():
                        setattr(server, k, v)
                    server.set_password(demo.MONITOR_PASSWORD)
                    server.save(update_fields=[*wanted, "password_encrypted"])
                    self.say(
                        f"{demo.ORGANIZATION}/{spec.name}: registration updated "
                        f"({', '.join(changed + ([] if same_password else ['password']))})"
                    )
                if not server.enabled:
                    self.say(
                        f"note: {demo.ORGANIZATION}/{spec.name} is disabled; enable it in the admin to collect it",
                        self.style.WARNING,
                    )
            out[spec.name] = server
        return out

    def _admin(self) -> str:
        from inventory.models import Membership, Organization

        User = get_user_model()
        password = secrets.token_urlsafe(12)
        user = User.objects.filter(username=ADMIN_USER).first() or User(username=ADMIN_USER)
        user.is_staff = user.is_superuser = user.is_active = True
        user.email = user.email or ADMIN_EMAIL
        user.set_password(password)
        user.save()
        self.admin_email = user.email
        # Staff sees every organization anyway; as a member the demo's organization page lists them too.
        organization, _ = Organization.objects.get_or_create(name=demo.ORGANIZATION)
        Membership.objects.update_or_create(
            organization=organization, user=user, defaults={"role": Membership.Role.ADMIN}
        )
        # The weekly report goes to the admin too (into the demo's SMTP sink).
        from reports.models import ReportOptIn

        ReportOptIn.objects.get_or_create(organization=organization, user=user)
        return password

    def _start_mail_sink(self) -> None:
        """The weekly reports and test sends of the demo go to files under .run/mail/ (nothing leaves the host)."""
        try:
            self.mail_sink = MailSink().start()
        except Exception as exc:  # noqa: BLE001 - the demo runs on without mail
            self.say(f"note: no local SMTP sink ({exc}); mail goes where EMAIL_* says", self.style.WARNING)

    def _start_webhook_sink(self) -> None:
        """The alerts' webhook goes to a receiver on loopback that writes each to .run/webhooks/ (nothing leaves)."""
        try:
            self.webhook_sink = WebhookSink(verify=signing.verify).start()
        except Exception as exc:  # noqa: BLE001 - the demo runs on without it
            self.say(f"note: no local webhook receiver ({exc}); the demo's alerts go by mail only", self.style.WARNING)

    def _alerting(self) -> None:
        """The demo organization's alert channels, a signed webhook to the local receiver and mail to the admin
        (into the SMTP sink), and its rules at the demo's thresholds (demo.ALERT_RULES, not the product's
        defaults): made on the first run, brought in line on the next ones (the receiver's port changes)."""
        from alerts import channels
        from alerts.models import Channel
        from alerts.services import channel_create, rule_update, rules_default
        from inventory.crypto import CredentialsError, decrypt_secret, encrypt_secret
        from inventory.models import Organization

        organization = Organization.objects.get(name=demo.ORGANIZATION)
        self.organization_id = organization.pk
        admin = get_user_model().objects.filter(username=ADMIN_USER).first()
        existing = {c.name: c for c in Channel.objects.filter(organization=organization)}
        try:
            sink = self.webhook_sink
            channel = existing.get(demo.WEBHOOK_CHANNEL)
            if sink is not None and channel is None:
                made = channel_create(
                    organization=organization,
                    name=demo.WEBHOOK_CHANNEL,
                    kind=Channel.Kind.WEBHOOK,
                    target=sink.url,
                    user=admin,
                )
                sink.secret = made.signing_secret
                self.say(f'alert channel "{demo.WEBHOOK_CHANNEL}" added: a signed webhook to {sink.url}')
            elif sink is not None and channel.kind == Channel.Kind.WEBHOOK:
                # The receiver has a new port each run: the channel follows it and keeps its signing secret.
                channel.target_encrypted = encrypt_secret(channels.clean_target(channel.kind, sink.url))
                try:
                    sink.secret = decrypt_secret(channel.signing_secret_encrypted)
                except CredentialsError:  # another CREDENTIALS_KEY: a new secret
                    sink.secret = signing.new_secret()
                    channel.signing_secret_encrypted = encrypt_secret(sink.secret)
                channel.save(update_fields=["target_encrypted", "signing_secret_encrypted"])
            if channel is not None and not channel.enabled:
                self.say(f'note: alert channel "{channel.name}" is disabled; enable it to see alerts there')
            if demo.EMAIL_CHANNEL not in existing:
                channel_create(
                    organization=organization,
                    name=demo.EMAIL_CHANNEL,
                    kind=Channel.Kind.EMAIL,
                    addresses=[self.admin_email],
                    user=admin,
                )
                self.say(f'alert channel "{demo.EMAIL_CHANNEL}" added: mail to {self.admin_email}')
            # The rules every organization gets, then the demo's thresholds (demo.ALERT_RULES: the demo's, not the
            # product's defaults) so that the storm server's alerts come within the demo's first minutes.
            for rule in rules_default(organization=organization):
                changed = {k: v for k, v in demo.ALERT_RULES.get(rule.kind, {}).items() if getattr(rule, k) != v}
                if changed:
                    rule_update(rule=rule, values=changed)
        except ValidationError as exc:
            raise CommandError(f"cannot set up the demo's alerts: {'; '.join(exc.messages)}") from exc

    def _start_children(self, children: demo.Children, *, web: bool, web_port: int) -> str:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.setdefault("ADVISOR_INTERVAL_S", str(demo.ADVISOR_INTERVAL_S))
        env.setdefault("ALERTS_EVALUATE_S", str(demo.ALERTS_EVALUATE_S))
        # The links in the demo's mail and alerts.
        env.setdefault("CONSOLE_URL", f"http://127.0.0.1:{web_port}")
        if self.mail_sink is not None:
            env["EMAIL_URL"] = self.mail_sink.url
        if os.geteuid() == 0:
            # `make demo` runs as root on a fresh Debian machine (PostgreSQL itself runs as the
            # user pgconsole): celery's "running the worker with superuser privileges" warning
            # would only clutter the demo's output.
            env["PYTHONWARNINGS"] = ",".join(
                filter(None, [env.get("PYTHONWARNINGS"), "ignore:You're running the worker with superuser privileges"])
            )
        cwd = settings.BASE_DIR
        demo.BEAT_SCHEDULE.parent.mkdir(parents=True, exist_ok=True)
        children.start("celery worker", demo.worker_argv(), env=env, cwd=cwd)
        children.start("celery beat", demo.beat_argv(), env=env, cwd=cwd)
        children.start("wait sampler", demo.sampler_argv(cwd / "manage.py"), env=env, cwd=cwd)
        if web:
            child = children.start("web server", demo.web_argv(cwd / "manage.py", web_port), env=env, cwd=cwd)
            # Let the web server's start-up lines pass before the banner (and check it listens).
            if not demo.wait_for_port(web_port, child, timeout=30):
                rc = child.proc.poll()
                return f"the web server did not start on 127.0.0.1:{web_port}" + (
                    f" (exit code {rc})" if rc is not None else ""
                )
        else:
            time.sleep(0.5)
        for child, rc in children.exited():
            return f"{child.name} exited at start-up with code {rc}: {' '.join(child.argv)}"
        return ""

    def _banner(self, clusters, servers, password, *, web, web_port, startup_s) -> None:
        py = os.path.relpath(sys.executable) if sys.executable.startswith(str(settings.BASE_DIR)) else sys.executable
        say, bold = self.say, self.style.MIGRATE_HEADING
        say()
        say(f"pgconsole demo is running (started in {startup_s:.0f}s) — Ctrl-C to stop", bold)
        say()
        if web:
            say(f"  console  http://127.0.0.1:{web_port}/   user {ADMIN_USER}   password {password}")
            say(f"  admin    http://127.0.0.1:{web_port}/admin/")
        else:
            say(f"  web      not started (--no-web); admin user {ADMIN_USER}, password {password}")
        db = connection.settings_dict
        say(
            f"  history  {db.get('HOST')}:{db.get('PORT')}/{db.get('NAME')}; celery worker (4 threads) "
            f"and beat on {settings.CELERY_BROKER_URL}"
        )
        say()
        say(
            f'  monitored servers (organization "{demo.ORGANIZATION}", a snapshot every '
            f"{demo.interval_s()}s; the first deltas after about {2 * demo.interval_s()}s):"
        )
        for spec in demo.SERVERS:
            c = clusters[spec.name]
            try:
                version = c.execute("SHOW server_version")[0][0]
            except Exception:  # noqa: BLE001 - only for display
                version = str(spec.major)
            say(
                f"    {spec.name:<20} PostgreSQL {version:<6} 127.0.0.1:{c.port}  "
                + ", ".join(f"{k}={v}" for k, v in spec.settings.items() if k.startswith("pg_stat"))
            )
            say(f"    {'':<20} {spec.case}")
        say()
        say("  workloads: " + "; ".join(f"{w.name} on {w.server}" for w in demo.demo_workloads()))
        say()
        say("  try, in another terminal:")
        env = _env_prefix()
        for spec in demo.SERVERS:
            say(f"    {env}{py} manage.py top --server {spec.name} --since 15m")
        say(f"    {env}{py} manage.py top --server {demo.PLANNING_SERVER.name} --since 15m --order plan")
        say(f"    {env}{py} manage.py servers list")
        advisor_s = os.environ.get("ADVISOR_INTERVAL_S", str(demo.ADVISOR_INTERVAL_S))  # as the children get it
        say(f"    {env}{py} manage.py advise --all   (the advisor evaluates every {advisor_s}s too)")
        for spec in demo.SERVERS:
            say(f"    psql {clusters[spec.name].dsn(demo.APP_DB, demo.APP_USER)}")
        if self.mail_sink is not None:
            say(
                f"    EMAIL_URL={self.mail_sink.url} {env}{py} manage.py reports send --org {demo.ORGANIZATION} "
                "--to you@example.com"
            )
            say()
            say(
                f"  mail     an SMTP sink on 127.0.0.1:{self.mail_sink.port} writes every message to "
                f"{os.path.relpath(self.mail_sink.folder)}/*.eml (nothing is relayed); the weekly report of "
                f'"{demo.ORGANIZATION}" goes to {self.admin_email}, and "Send me a test now" on its report page too'
            )
        say()
        evaluate_s = os.environ.get("ALERTS_EVALUATE_S", str(demo.ALERTS_EVALUATE_S))  # as the children get it
        dealloc = demo.ALERT_RULES["dealloc"]
        where = [f"mail to {self.admin_email}" + (" (into the SMTP sink)" if self.mail_sink is not None else "")]
        if self.webhook_sink is not None:
            where.insert(
                0,
                f"signed webhooks to a receiver on 127.0.0.1:{self.webhook_sink.port} that writes each to "
                f"{os.path.relpath(self.webhook_sink.folder)}/*.json with its signature checked",
            )
        say(
            f'  alerts   the rules of "{demo.ORGANIZATION}" evaluated every {evaluate_s}s, with the demo thresholds '
            f"(a deallocation storm over {dealloc['dealloc_minutes']} min and critical advice, both sent at once): "
            + "; ".join(where)
            + (f"; see them at http://127.0.0.1:{web_port}/organizations/{self.organization_id}/alerts/" if web else "")
        )
        say()
        say(f"  status every {STATUS_EVERY_S:.0f}s:")

    # ---- running -----------------------------------------------------------------

    def _wait(self, duration, children: demo.Children, workloads: demo.WorkloadSet, servers) -> str:
        started = time.monotonic()
        since = timezone.now() - timedelta(seconds=1)
        deadline = None if duration is None else started + duration
        next_status = started + STATUS_EVERY_S
        while not self.stop.wait(0.5):
            now = time.monotonic()
            for child, rc in children.exited():
                self.reason = f"{child.name} exited unexpectedly with code {rc}"
                return self.reason
            if deadline is not None and now >= deadline:
                self.reason = f"--duration {duration:g}s elapsed"
                break
            if now >= next_status:
                next_status += STATUS_EVERY_S
                self._status(now - started, workloads, servers, since)
        return ""

    def _status(self, elapsed: float, workloads: demo.WorkloadSet, servers, since) -> None:
        from advisor.selectors import recommendation_counts
        from history.models import Snapshot
        from inventory.models import Server

        rates = ", ".join(
            f"{w.name} {_rate(r)} {w.unit}/s" + (f" ({w.counter.errors} errors)" if w.counter.errors else "")
            for w, r in workloads.rates()
        )
        lines = [f"[{_fmt_elapsed(elapsed)}] workloads: {rates}"]
        try:
            counts = recommendation_counts(server_ids=[server.pk for server in servers.values()])
            for name, server in servers.items():
                s = Server.objects.get(pk=server.pk)
                snaps = list(
                    Snapshot.objects.filter(server_id=s.pk, taken_at__gte=since)
                    .order_by("-taken_at")
                    .values("kind", "entries", "changed", "interval_s", "dealloc_delta", "track_planning")[:50]
                )
                text = f"{name}: {len(snaps)} snapshot{'' if len(snaps) == 1 else 's'}"
                if snaps:
                    last = snaps[0]
                    if last["kind"] == "baseline":
                        text += f", baseline of {last['entries']} entries"
                    else:
                        text += (
                            f", last: {last['changed']} of {last['entries']} entries changed in "
                            f"{last['interval_s']:.0f}s"
                        )
                        if last["dealloc_delta"] is not None and last["interval_s"]:
                            text += (
                                f", {last['dealloc_delta']} deallocations "
                                f"({last['dealloc_delta'] / last['interval_s']:.0f}/s)"
                            )
                    text += ", planning " + ("tracked" if last["track_planning"] else "not tracked")
                advice = counts[s.pk]
                if advice.total:
                    text += f", advisor: {advice.critical} critical, {advice.warning} warning, {advice.info} info"
                if s.consecutive_failures:
                    text += f" — FAILING ({s.consecutive_failures}x): {s.last_error_message[:200]}"
                lines.append(f"         {text}")
            lines.append(f"         {self._alerts_status()}")
        except DatabaseError as exc:
            lines.append(f"         history store unavailable: {str(exc).strip()[:200]}")
        self.say("\n".join(lines))

    def _webhooks_received(self) -> str:
        sink = self.webhook_sink
        if sink is None:
            return "no webhook receiver"
        return f"{os.path.relpath(sink.folder)}/*.json, {sink.received} received" + (
            f", {sink.verified} with a verified signature" if sink.received else ""
        )

    def _alerts_status(self) -> str:
        from alerts.models import Alert

        states = dict(
            Alert.objects.filter(rule__organization_id=self.organization_id)
            .exclude(state=Alert.State.RESOLVED)
            .order_by()
            .values_list("state")
            .annotate(n=Count("pk"))
        )
        text = f"alerts: {states.get(Alert.State.OPEN, 0)} open, {states.get(Alert.State.PENDING, 0)} pending"
        text += f"; webhooks: {self._webhooks_received()}"
        if self.mail_sink is not None:
            text += f"; mail: {os.path.relpath(self.mail_sink.folder)}/*.eml, {self.mail_sink.received} received"
        return text

    # ---- shutdown ----------------------------------------------------------------

    def _shutdown(self, clusters, workloads: demo.WorkloadSet, children: demo.Children) -> None:
        t0 = time.monotonic()
        self.say()
        self.say(f"stopping ({self.reason or 'start-up ended'}):", self.style.MIGRATE_HEADING)
        left = workloads.stop()
        self.say("  workloads stopped" + (f" (still running: {', '.join(left)})" if left else ""))
        if children.items:
            results = children.terminate()
            self.say("  " + ", ".join(f"{c.name} {_ended(rc)}" for c, rc in results))
        if self.mail_sink is not None:
            self.mail_sink.stop()
            folder = os.path.relpath(self.mail_sink.folder)
            self.say(f"  mail sink stopped ({self.mail_sink.received} messages in {folder})")
        if self.webhook_sink is not None:
            self.webhook_sink.stop()
            self.say(f"  webhook receiver stopped ({self._webhooks_received()})")
        demo.stop_clusters(clusters)
        still = [c.name for c in clusters.values() if c.is_running()]
        if still:
            self.say(f"  demo clusters still running: {', '.join(still)}", self.style.ERROR)
        else:
            self.say(f"  demo clusters stopped ({', '.join(c.name for c in clusters.values())})")
        self.say(f"done in {time.monotonic() - t0:.1f}s")
