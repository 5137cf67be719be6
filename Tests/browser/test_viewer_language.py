"""The viewer page's language (view.html?language=…) in headless chromium against the real
server. A translated broadcast (Italian spoken, captioned in English by Whisper base, published
with `steno send --translate en`) carries two languages: the page follows the one its address
names, lists both in a picker (the current one chosen), marks each final with its language
(`lang`: the English captions are English, though their finals name the language spoken), and
a change of language starts the captions again in the other one, in the page address and the
downloads too. An untranslated broadcast (pocketsphinx) has one language: the picker stays
hidden, the page still passes the language on; one it does not carry, or a value that is not
a language, gives its own captions."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from test_viewer import CHANNEL, open_viewer, publish, shown_finals

TRANSLATED = "translated-view"
# Festival's Italian voice reads ISO-8859-1 (as Tests/StenoCLITests/MultilingualServeTests).
ITALIAN = "Buongiorno a tutti. Oggi parliamo del tempo e della città di Roma."


def italian_speech(folder: Path) -> Path:
    assert shutil.which("text2wave"), "festival is missing: run scripts/bootstrap.sh test"
    text, wav = folder / "it.txt", folder / "it.wav"
    text.write_bytes(ITALIAN.encode("iso-8859-1"))
    run = subprocess.run(["text2wave", "-F", "16000", "-eval", "(voice_lp_diphone)", "-o", str(wav), str(text)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and wav.is_file(), f"festival's Italian voice (festvox-italp16k) is missing: {run.stderr}"
    return wav


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def picker(page) -> dict:
    return page.evaluate("""() => {
        const select = document.getElementById('viewer-language');
        const group = document.getElementById('viewer-language-group');
        const label = document.querySelector('label[for="viewer-language"]');
        return { hidden: group.hidden || !group.offsetParent, value: select.value, label: label && label.textContent,
                 options: [...select.options].map((o) => [o.value, o.textContent]) };
    }""")


def finals_lang(page) -> list[str]:
    return page.evaluate("[...document.querySelectorAll('.final')].map((el) => el.lang)")


def downloads(page) -> list[str]:
    return [page.get_attribute(f"#viewer-download-{kind}", "href") for kind in ("txt", "vtt", "srt")]


def test_viewer_chooses_the_language_of_a_translated_broadcast(make_server, steno_bin, launch_browser, tmp_path, artifacts):
    server = make_server("--engine", "whisper")  # tiny.en and the multilingual base beside it
    models = [m["name"] for m in get_json(f"{server.http}/v1/models")["models"]]
    if "whisper-base" not in models:
        pytest.fail(f"the server has no whisper-base ({models}): scripts/bootstrap.sh installs it in .venv/models")
    wav = italian_speech(tmp_path)
    browser = launch_browser()
    base = f"ws://127.0.0.1:{server.port}/v1/listen?channel={TRANSLATED}"

    # Two viewers before the broadcast: one asks for Italian, one for the publisher's own.
    italian, it_problems = open_viewer(browser, server, f"?channel={TRANSLATED}&language=it", {"width": 1280, "height": 800})
    english, en_problems = open_viewer(browser, server, f"?channel={TRANSLATED}", {"width": 1280, "height": 800})
    for page in (italian, english):
        page.wait_for_selector("#viewer-status[data-state=waiting]")
        assert picker(page)["hidden"], "no languages to choose before a broadcast"
    assert italian.evaluate("window.__probe.urls") == [f"{base}&language=it"]
    assert english.evaluate("window.__probe.urls") == [base]
    assert all(href.endswith("?language=it") for href in downloads(italian)), downloads(italian)
    assert not any("language" in href for href in downloads(english)), downloads(english)

    sent = subprocess.run([str(steno_bin), "send", str(wav), "--fast", "--server", f"ws://127.0.0.1:{server.port}",
                           "--language", "it", "--translate", "en", "--channel", TRANSLATED, "--format", "jsonl"],
                          capture_output=True, text=True, timeout=300)
    assert sent.returncode == 0, sent.stderr[-4000:]
    published = [e for e in map(json.loads, sent.stdout.splitlines()) if e.get("type") == "final" and e["text"].strip()]
    assert published and all(e.get("original") for e in published), sent.stdout
    entry = next(c for c in get_json(f"{server.http}/v1/channels")["channels"] if c["name"] == TRANSLATED)
    assert entry["languages"] == ["en", "it"], entry

    # Italian: what was said, each final marked Italian; no volatile line (the original has none).
    italian.wait_for_function(f"document.querySelectorAll('.final').length >= {len(published)}")
    shown = [f["text"] for f in shown_finals(italian, 1)]
    assert shown == [e["original"]["text"].strip() for e in published], shown
    assert "Roma" in " ".join(shown) and "Rome" not in " ".join(shown), shown
    assert set(finals_lang(italian)) == {"it"}
    assert not [m for m in italian.evaluate("window.__probe.received") if m["type"] == "volatile"]
    italian.wait_for_function("!document.getElementById('viewer-language-group').hidden")
    assert picker(italian) == {"hidden": False, "value": "it", "label": "Language", "options": [["en", "en"], ["it", "it"]]}

    # The publisher's own: English, marked English (its finals name Italian, the language spoken).
    english.wait_for_function(f"document.querySelectorAll('.final').length >= {len(published)}")
    assert [f["text"] for f in shown_finals(english, 1)] == [e["text"].strip() for e in published]
    assert set(finals_lang(english)) == {"en"}
    english.wait_for_function("!document.getElementById('viewer-language-group').hidden")
    assert picker(english)["value"] == "en" and picker(english)["options"] == [["en", "en"], ["it", "it"]]
    english.wait_for_selector("#viewer-status[data-state=ended]")

    # Changed to Italian: the captions start again in it (the backfill, once), in a new connection,
    # the page address and the downloads.
    english.select_option("#viewer-language", "it")
    english.wait_for_function("window.__probe.urls.length === 2")
    assert english.evaluate("window.__probe.urls")[1] == f"{base}&language=it"
    english.wait_for_function(f"document.querySelectorAll('.final').length >= {len(published)}")
    english.wait_for_selector("#viewer-status[data-state=ended]")
    english.wait_for_timeout(300)  # nothing more may arrive
    assert [f["text"] for f in shown_finals(english, 1)] == shown
    assert english.evaluate("document.querySelectorAll('section.broadcast').length") == 1
    assert set(finals_lang(english)) == {"it"}
    assert english.url.endswith(f"view.html?channel={TRANSLATED}&language=it"), english.url
    assert picker(english)["value"] == "it"
    hrefs = downloads(english)
    assert hrefs[1].endswith(f"/v1/channels/{TRANSLATED}/captions.vtt?language=it"), hrefs
    vtt = english.request.get(hrefs[1])
    assert vtt.status == 200 and "Roma" in vtt.text() and "Rome" not in vtt.text(), vtt.text()
    assert english.get_attribute("#viewer-download-vtt", "download") == f"{TRANSLATED}.it.vtt"
    english.screenshot(path=str(artifacts / "viewer-language.png"), full_page=True)
    # And back: the English again.
    english.select_option("#viewer-language", "en")
    english.wait_for_function("window.__probe.urls.length === 3")
    english.wait_for_function("[...document.querySelectorAll('.final')].some((el) => el.lang === 'en')")
    english.wait_for_function(f"document.querySelectorAll('.final').length >= {len(published)}")
    assert set(finals_lang(english)) == {"en"}
    assert english.url.endswith("&language=en") and downloads(english)[0].endswith("captions.txt?language=en")

    # A viewer after the broadcast asking for the original, whatever its language: the Italian.
    late, late_problems = open_viewer(browser, server, f"?channel={TRANSLATED}&language=original", {"width": 360, "height": 740})
    late.wait_for_function(f"document.querySelectorAll('.final').length >= {len(published)}")
    assert [f["text"] for f in shown_finals(late, 1)] == shown
    late.wait_for_function("!document.getElementById('viewer-language-group').hidden")
    assert picker(late)["value"] == "it", "the original is the second language listed"
    box = late.locator("#viewer-language").bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= 360, f"the picker is off screen: {box}"
    assert late.evaluate("document.documentElement.scrollWidth") <= 360
    late.screenshot(path=str(artifacts / "viewer-language-360.png"), full_page=True)
    for problems in (it_problems, en_problems, late_problems):
        assert not problems, "\n".join(problems)


def test_viewer_language_of_an_untranslated_broadcast(server, launch_browser):
    browser = launch_browser()
    page, problems = open_viewer(browser, server, f"?channel={CHANNEL}&language=en", {"width": 1280, "height": 800})
    other, other_problems = open_viewer(browser, server, f"?channel={CHANNEL}&language=fr", {"width": 1280, "height": 800})
    invalid, invalid_problems = open_viewer(browser, server, f"?channel={CHANNEL}&language=not%20a%20tag",
                                            {"width": 1280, "height": 800})
    for p in (page, other, invalid):
        p.wait_for_selector("#viewer-status[data-state=waiting]")
    base = f"ws://127.0.0.1:{server.port}/v1/listen?channel={CHANNEL}"
    assert page.evaluate("window.__probe.urls") == [f"{base}&language=en"]
    assert all(href.endswith("?language=en") for href in downloads(page)), downloads(page)
    # A value the server would refuse (400) is left out: the publisher's own captions.
    assert invalid.evaluate("window.__probe.urls") == [base]
    assert not any("language" in href for href in downloads(invalid))

    published = publish(browser, server)
    count = len([f for f in published["finals"] if f["text"].strip()])
    texts = [f["text"].strip() for f in published["finals"] if f["text"].strip()]
    for p in (page, other, invalid):
        p.wait_for_function(f"document.querySelectorAll('.final').length >= {count}")
        assert [f["text"] for f in shown_finals(p, 1)] == texts
        p.wait_for_selector("#viewer-status[data-state=ended]")
    entry = next(c for c in page.request.get(f"{server.http}/v1/channels").json()["channels"] if c["name"] == CHANNEL)
    assert entry["languages"] == ["en"], entry
    for p in (page, other, invalid):
        p.wait_for_function("document.getElementById('viewer-language').options.length === 1")
        assert picker(p)["hidden"], "one language: nothing to choose"
        assert picker(p)["value"] == "en"
        assert finals_lang(p) == [""] * count, "pocketsphinx's finals name no language"
    # A language it does not carry: the server says so (not fatal), the page says it plainly.
    errors = [m for m in other.evaluate("window.__probe.received") if m["type"] == "error"]
    assert [e["code"] for e in errors] == ["bad_message"], errors
    assert other.is_visible("#viewer-notice")
    assert "no captions in “fr”" in other.text_content("#viewer-notice-text")
    assert other.evaluate("window.__probe.urls.length") == 1, "not a reason to reconnect"
    href = page.get_attribute("#viewer-download-txt", "href")
    response = page.request.get(href)
    assert response.status == 200 and response.text().strip(), href
    assert page.request.get(downloads(other)[0]).status == 404, "a caption file in a language not carried"
    for found in (problems, other_problems, invalid_problems):
        assert not found, "\n".join(found)
