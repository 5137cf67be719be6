"""page.js, the caption view both pages use, in chromium with made-up finals: paragraphs
after pauses of two seconds, each with its time; the volatile line where the next words
will go; repeated finals dropped where asked. (The pages' own tests check the same rules on
real captions.)"""

from __future__ import annotations

from conftest import check_paragraphs

BLANK = "<!doctype html><meta charset=utf-8><div id=root></div><span id=volatile class=volatile></span>"

SCRIPT = """async () => {
  const { CaptionView } = await import('/page.js');
  const root = document.getElementById('root');
  const volatile = document.getElementById('volatile');
  let changes = 0;
  const view = new CaptionView({ root, volatile, onChange: () => { changes += 1; } });
  const where = () => volatile.parentElement?.closest('.paragraph')?.dataset.start ?? null;
  const out = {};
  view.addFinal({ start: 0.5, end: 1.5, text: 'one' });
  view.addFinal({ start: 3.45, end: 4, text: 'two' });          // 1.95 s later: same paragraph
  view.setVolatile({ start: 6.0, end: 6.5, text: 'thr' });     // 2.0 s later: a new paragraph for it
  out.pendingWhileGuessing = root.querySelectorAll('.paragraph').length;
  out.volatileIn = where();
  view.setVolatile(null);                                      // the guess went away: so does its paragraph
  out.afterClear = root.querySelectorAll('.paragraph').length;
  view.setVolatile({ start: 6.1, end: 6.5, text: 'thr' });
  view.addFinal({ start: 6.2, end: 7, text: 'three' });        // replaces it, in that paragraph
  out.afterFinal = root.querySelectorAll('.paragraph').length;
  out.volatileText = volatile.textContent;
  view.setVolatile({ start: 7.5, end: 8, text: 'fo' });        // 0.5 s later: after 'three'
  out.volatileAfterThree = where();
  out.volatileIsLast = volatile === volatile.parentElement.lastChild;
  view.addFinal({ start: 7.5, end: 8.2, text: '   ' });        // no text: nothing shown, guess cleared
  view.breakParagraph();
  view.addFinal({ start: 8.5, end: 9, text: 'four' });         // a new paragraph on request
  view.addFinal({ start: 3725, end: 3726, text: 'late' });
  view.addFinal({ start: 3727, end: 3728, text: 'spät', language: 'de' });
  out.langs = [...root.querySelectorAll('.final')].map((f) => f.lang);
  out.languageTags = [...root.querySelectorAll('.lang-tag')].map((t) => t.textContent);
  out.finals = view.finals.map((f) => f.text);
  out.times = [...root.querySelectorAll('.paragraph-time')].map((t) => t.textContent);
  out.titles = [...root.querySelectorAll('.final')].map((f) => f.title);
  out.volatileHidden = volatile.getAttribute('aria-hidden');
  out.changes = changes;

  const other = document.createElement('div');
  document.body.append(other);
  const deduped = new CaptionView({ root: other, volatile: document.createElement('span'), dedupe: true });
  deduped.addFinal({ start: 0, end: 1, text: 'a' });
  deduped.addFinal({ start: 0, end: 1, text: 'a' });
  deduped.addFinal({ start: 1.2, end: 2, text: 'b' });
  out.deduped = deduped.finals.map((f) => f.text);
  view.clear();
  out.cleared = [root.children.length, view.finals.length, volatile.parentElement === root];

  // The model choice: the server's list after "the server's default", the wanted one kept.
  const { fillModelChoice } = await import('/page.js');
  const select = document.createElement('select');
  select.append(new Option("The server's default", ''));
  const listed = [{ name: 'whisper-tiny.en', engine: 'whisper', language: 'en-US', default: true },
                  { name: 'en-us', engine: 'pocketsphinx', language: 'en-US' }];
  fillModelChoice(select, listed, 'en-us');
  out.models = [[...select.options].map((o) => o.textContent), select.value];
  fillModelChoice(select, [], 'custom');            // no list (unreachable): the wanted one stays
  out.unlisted = [[...select.options].map((o) => o.value), select.value];
  fillModelChoice(select, listed, '');
  out.none = select.value;

  // The language choice: Auto first, then every language of the models, each once.
  const { fillLanguageChoice } = await import('/page.js');
  const languages = document.createElement('select');
  fillLanguageChoice(languages, [{ name: 'whisper-tiny.en', languages: ['en'] }, { name: 'whisper-base', languages: ['en', 'it', 'ru'] }], 'en');
  out.languages = [[...languages.options].map((o) => o.value), languages.options[2].textContent, languages.value];
  fillLanguageChoice(languages, [], 'pt-BR');
  out.unlistedLanguage = [[...languages.options].map((o) => o.value), languages.value];
  return out;
}"""


def test_caption_view(server, launch_browser):
    browser = launch_browser()
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.route("**/__tests__/blank.html", lambda route: route.fulfill(status=200, body=BLANK, content_type="text/html"))
    page.goto(f"{server.http}/__tests__/blank.html")
    out = page.evaluate(SCRIPT)
    assert out["pendingWhileGuessing"] == 2 and out["volatileIn"] == "6.000"
    assert out["afterClear"] == 1
    assert out["afterFinal"] == 2 and out["volatileText"] == ""
    assert out["volatileAfterThree"] == "6.200" and out["volatileIsLast"]
    assert out["finals"] == ["one", "two", "three", "four", "late", "spät"]
    # A final a multilingual model says the language of is marked as that language.
    assert out["langs"] == ["", "", "", "", "", "de"]
    assert out["languageTags"] == ["de"], "a tag where the language changes"
    assert out["times"] == ["0:00", "0:06", "0:08", "1:02:05"]
    assert out["titles"][0] == "0:00.50 – 0:01.50"
    assert out["volatileHidden"] == "true", "the volatile guess is not read out by screen readers"
    assert out["changes"] > 5
    assert out["deduped"] == ["a", "b"]
    assert out["cleared"] == [1, 0, True]
    assert out["models"] == [["The server's default", "whisper-tiny.en (whisper, en-US) — default",
                              "en-us (pocketsphinx, en-US)"], "en-us"]
    assert out["unlisted"] == [["", "custom"], "custom"]
    assert out["none"] == ""
    assert out["languages"] == [["auto", "en", "it", "ru"], "Italian (it)", "en"]
    assert out["unlistedLanguage"] == [["auto", "pt-BR"], "pt-BR"]
    assert not problems, problems


def test_caption_view_layout(server, launch_browser):
    """The rule of check_paragraphs on a page's real layout: times visible, breaks at pauses."""
    browser = launch_browser()
    page = browser.new_page(viewport={"width": 360, "height": 640})
    page.route("**/__tests__/blank.html", lambda route: route.fulfill(status=200, body=BLANK, content_type="text/html"))
    page.goto(f"{server.http}/__tests__/blank.html")
    page.add_style_tag(url=f"{server.http}/styles.css")
    page.evaluate("""async () => {
      const { CaptionView } = await import('/page.js');
      const view = new CaptionView({ root: document.getElementById('root'), volatile: document.getElementById('volatile') });
      [[0.4, 2.1], [3.0, 5.5], [7.6, 9.0], [9.5, 12.25], [14.25, 15]].forEach(([start, end], i) =>
        view.addFinal({ start, end, text: `final number ${i}` }));
    }""")
    paragraphs = check_paragraphs(page, "#root")
    assert [len(p["finals"]) for p in paragraphs] == [2, 2, 1]
