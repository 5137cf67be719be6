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


def test_readme_example_runs(server, node, reference, tmp_path):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    # What the README says about running it agrees with what is run here.
    assert "node --experimental-websocket captions.mjs" in text and "Node 22" in text
    script = tmp_path / "captions.mjs"
    script.write_text(readme_snippet(), encoding="utf-8")
    (tmp_path / "web-client").symlink_to(REPO / "web-client", target_is_directory=True)
    # Node's own WebSocket (22+, or 20 with --experimental-websocket); on Debian 12's Node 18
    # the WebSocket of node-ws stands in for it (conftest.Node).
    result = subprocess.run(node.command(str(script), str(SPEECH_WAV), server.ws), cwd=tmp_path,
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
