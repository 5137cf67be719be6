"""README.md's script example, extracted from README.md and run exactly as written there
(saved as captions.mjs next to a web-client/ folder, as the README says) in Node against the
real server: it must print the server's captions of the test file and its duration."""

from __future__ import annotations

import re
import subprocess
import wave

from conftest import REPO, SPEECH_WAV, node_env
from wordmatch import assert_similar

MARKER = "<!-- Tests/browser/test_readme.py runs the block below exactly as it is written here. -->"
CAPTION_LINE = re.compile(r"^\[(\d+\.\d\d) → (\d+\.\d\d)\] (.+)$")


def readme_snippet() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert MARKER in text, "README.md lost the marker of its script example"
    match = re.search(re.escape(MARKER) + r"\n```js\n(.*?)\n```\n", text, re.S)
    assert match, "no ```js block right after the marker in README.md"
    return match.group(1) + "\n"


# How the README says to run it on Debian 12's Node 18 (with node-ws): the preload that gives
# Node the WebSocket of node-ws (conftest.Node uses the same file there).
README_NODE18 = "node --require ./Tests/browser/node_websocket.cjs captions.mjs"


def test_readme_example_runs(server, node, reference, tmp_path):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    # What the README says about running it agrees with what is run here.
    assert "node --experimental-websocket captions.mjs" in text and "Node 22" in text
    assert README_NODE18 in text and "node-ws" in text
    # Node's own WebSocket (22+, or 20 with --experimental-websocket); on Debian 12's Node 18
    # the WebSocket of node-ws stands in for it (conftest.Node).
    run_readme_example(node.command, node, server, reference, tmp_path)


def test_readme_example_runs_as_on_debian_12s_node(server, node, reference, tmp_path):
    """The README's command for Node 18 (node-ws preloaded), whatever this Node is: the preload
    changes nothing where Node has a WebSocket of its own, and gives it one elsewhere."""
    preload = README_NODE18.split()[1:3]
    assert (REPO / preload[1]).is_file()
    run_readme_example(lambda *args: [node.path, *preload, *args], node, server, reference, tmp_path)


def run_readme_example(command, node, server, reference, tmp_path):
    """Runs the README's script as captions.mjs in a folder laid out as the repository is."""
    script = tmp_path / "captions.mjs"
    script.write_text(readme_snippet(), encoding="utf-8")
    (tmp_path / "web-client").symlink_to(REPO / "web-client", target_is_directory=True)
    (tmp_path / "Tests").symlink_to(REPO / "Tests", target_is_directory=True)
    result = subprocess.run(command(str(script), str(SPEECH_WAV), server.ws), cwd=tmp_path,
                            capture_output=True, text=True, timeout=300, env=node_env())
    assert result.returncode == 0, f"node {node.version} ({node.websocket} WebSocket):\n{result.stderr[-4000:]}"
    lines = result.stdout.strip().splitlines()
    with wave.open(str(SPEECH_WAV)) as w:
        seconds = w.getnframes() / w.getframerate()
    last = re.fullmatch(r"(\d+(?:\.\d+)?) s of audio captioned", lines[-1])
    assert last and abs(float(last.group(1)) - seconds) < 0.001, lines[-1]
    captions = [CAPTION_LINE.match(line) for line in lines[:-1]]
    assert captions and all(captions), result.stdout
    assert_similar(reference, [m.group(3) for m in captions], min_f1=0.8)
    ends = [float(m.group(2)) for m in captions]
    assert ends == sorted(ends) and ends[-1] <= seconds + 0.05
