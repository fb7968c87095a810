"""`pip install ./clients/python` in a fresh virtualenv gives a working `bpm` without the server's code."""

import os
import subprocess
import venv
from pathlib import Path

CLIENT_DIR = Path(__file__).resolve().parents[3] / "clients" / "python"


def test_fresh_venv_install_gives_bpm(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(CLIENT_DIR)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-3000:]

    help_text = subprocess.run(
        [str(env_dir / "bin" / "bpm"), "--help"], capture_output=True, text=True, timeout=60
    )
    assert help_text.returncode == 0, help_text.stderr
    assert "BPM_URL" in help_text.stdout and "BPM_TOKEN" in help_text.stdout

    # The SDK imports on its own: none of the server's packages came with it.
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util, bpm_client; "
            "print(bpm_client.Client.__name__, "
            "[m for m in ('django', 'breakpoints', 'rest_framework') if importlib.util.find_spec(m)])",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,  # not the project folder, whose packages would be importable from cwd
        # nor from a PYTHONPATH that names it (a worktree run)
        env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"},
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["Client", "[]"]
