"""console/keys.py: the env-file generator (standard library only) and the checks the settings run."""

import base64
import stat
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

from console.keys import (
    DEV_CREDENTIALS_KEY,
    DEV_SECRET_KEY,
    generate_credentials_key,
    generate_secret_key,
    key_problems,
)

ROOT = Path(__file__).resolve().parents[2]


def _generate(*args: str) -> subprocess.CompletedProcess:
    # -I -S: no site-packages and no user environment, as on a host where nothing is installed yet.
    return subprocess.run(
        [sys.executable, "-I", "-S", "console/keys.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def _read_env_file(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def test_generated_keys_pass_the_production_checks():
    for _ in range(20):
        secret_key, credentials_key = generate_secret_key(), generate_credentials_key()
        assert key_problems(secret_key=secret_key, credentials_key=credentials_key, debug=False) == []
        Fernet(credentials_key.encode())  # what console/crypto.py does with it
        # Nothing an env file or docker compose would interpolate, quote or cut.
        assert not set(secret_key + credentials_key) & set("$#'\" \\`")


def test_the_development_keys_pass_only_with_debug():
    assert key_problems(secret_key=DEV_SECRET_KEY, credentials_key=DEV_CREDENTIALS_KEY, debug=True) == []
    problems = key_problems(secret_key=DEV_SECRET_KEY, credentials_key=DEV_CREDENTIALS_KEY, debug=False)
    assert [p.split(" (")[0] for p in problems] == [
        "SECRET_KEY is the development key",
        "CREDENTIALS_KEY is the development key",
    ]


def test_a_credentials_key_of_the_wrong_length_is_not_a_fernet_key():
    short = base64.urlsafe_b64encode(b"x" * 16).decode()
    problems = key_problems(secret_key=generate_secret_key(), credentials_key=short, debug=False)
    assert len(problems) == 1 and problems[0].startswith("CREDENTIALS_KEY is not a Fernet key")


def test_writes_an_env_file_readable_by_its_owner_only_and_never_overwrites_it(tmp_path):
    path = tmp_path / ".env.compose"
    result = _generate(str(path))
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    keys = _read_env_file(path)
    assert set(keys) == {"SECRET_KEY", "CREDENTIALS_KEY"}
    assert key_problems(secret_key=keys["SECRET_KEY"], credentials_key=keys["CREDENTIALS_KEY"], debug=False) == []

    again = _generate(str(path))
    assert again.returncode == 1 and "--force" in again.stderr
    assert _read_env_file(path) == keys  # the key that decrypts the stored passwords is kept

    path.chmod(0o644)
    forced = _generate("--force", str(path))
    assert forced.returncode == 0, forced.stderr
    assert _read_env_file(path)["CREDENTIALS_KEY"] != keys["CREDENTIALS_KEY"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_prints_to_standard_output_without_a_path():
    result = _generate()
    assert result.returncode == 0, result.stderr
    assert [line.split("=", 1)[0] for line in result.stdout.splitlines() if not line.startswith("#")] == [
        "SECRET_KEY",
        "CREDENTIALS_KEY",
    ]
