"""What OBS Studio does with the text of a caption sent to it (obs-websocket's
SendStreamCaption): libobs's obs_output_output_caption_text2() keeps its first 128 bytes, and
libcaption's caption_frame_from_text() wraps them into a 15 x 32 caption frame, where a
character CEA-608 cannot show leaves its cell empty and ends its row.  Part of the fake of
obs-websocket 5 (obs_websocket.py), imitated from libobs/obs-output.c and deps/libcaption."""

# --------------------------------------------------------------------------------------
# What OBS does with caption text: libobs obs_output_output_caption_text2() + libcaption
# --------------------------------------------------------------------------------------

CAPTION_LINE_BYTES = 128  # libobs: #define CAPTION_LINE_BYTES (4 * CAPTION_LINE_CHARS)
SCREEN_ROWS = 15  # libcaption caption.h
SCREEN_COLS = 32

# Every string libcaption's _eia608_from_utf8() (eia608_from_utf8.re2c) maps to a non-zero
# EIA-608 code.  A character not in this set is "not representable": caption_frame_write_char
# refuses it and its cell stays empty.  Written as the UTF-8 byte strings of the re2c file.
_EIA608_NON_ASCII = [
    # second half of the ASCII exceptions (basic North American set)
    b"\xC3\xA1", b"\xC3\xA9", b"\xC3\xAD", b"\xC3\xB3", b"\xC3\xBA", b"\xC3\xA7",
    b"\xC3\xB7", b"\xC3\x91", b"\xC3\xB1", b"\xE2\x96\x88",
    # special North American set
    b"\xC2\xAE", b"\xC2\xB0", b"\xC2\xBD", b"\xC2\xBF", b"\xE2\x84\xA2", b"\xC2\xA2",
    b"\xC2\xA3", b"\xE2\x99\xAA", b"\xC3\xA0", b"\xC2\xA0", b"\xC3\xA8", b"\xC3\xA2",
    b"\xC3\xAA", b"\xC3\xAE", b"\xC3\xB4", b"\xC3\xBB",
    # extended Spanish / miscellaneous
    b"\xC3\x81", b"\xC3\x89", b"\xC3\x93", b"\xC3\x9A", b"\xC3\x9C", b"\xC3\xBC",
    b"\xE2\x80\x98", b"\xC2\xA1", b"\xE2\x80\x99", b"\xE2\x80\x94", b"\xC2\xA9",
    b"\xE2\x84\xA0", b"\xE2\x80\xA2", b"\xE2\x80\x9C", b"\xE2\x80\x9D",
    # extended French
    b"\xC3\x80", b"\xC3\x82", b"\xC3\x87", b"\xC3\x88", b"\xC3\x8A", b"\xC3\x8B",
    b"\xC3\xAB", b"\xC3\x8E", b"\xC3\x8F", b"\xC3\xAF", b"\xC3\x94", b"\xC3\x99",
    b"\xC3\xB9", b"\xC3\x9B", b"\xC2\xAB", b"\xC2\xBB",
    # Portuguese
    b"\xC3\x83", b"\xC3\xA3", b"\xC3\x8D", b"\xC3\x8C", b"\xC3\xAC", b"\xC3\x92",
    b"\xC3\xB2", b"\xC3\x95", b"\xC3\xB5",
    # German / Danish
    b"\xC3\x84", b"\xC3\xA4", b"\xC3\x96", b"\xC3\xB6", b"\xC3\x9F", b"\xC2\xA5",
    b"\xC2\xA4", b"\xC2\xA6", b"\xC3\x85", b"\xC3\xA5", b"\xC3\x98", b"\xC3\xB8",
    b"\xE2\x94\x8C", b"\xE2\x94\x90", b"\xE2\x94\x94", b"\xE2\x94\x98",
]
EIA608_REPRESENTABLE = frozenset(
    [chr(c) for c in range(0x20, 0x7F)] + [b.decode("utf-8") for b in _EIA608_NON_ASCII]
)

# A trailing UTF-8 sequence cut in half by the 128-byte truncation: one "character" for
# libcaption's walk (utf8_char_length reads its lead byte), never representable.
_PARTIAL = object()
_NUL = ""  # what libcaption reads at (and past) the end of the C string


def _is_whitespace(u):
    """libcaption utf8_char_whitespace(): first byte <= ' ', DEL, or U+00A0 (and NUL)."""
    if u is _PARTIAL:
        return False
    return u == _NUL or ord(u) <= 0x20 or u == "\x7f" or u == "\u00a0"


def _is_newline(u):
    """libcaption _utf8_newline(): '\\r' or '\\n' (NUL is not a newline)."""
    return u in ("\r", "\n")


def _wrap_length(units, pos, size):
    """libcaption utf8_wrap_length(data, size): how many characters go on this row.

    Looks at positions 0..size (size + 1 of them): a newline ends the row there; the last
    whitespace seen is the split point; with none, `size` characters (a word longer than a
    row is cut, not hyphenated).  NUL counts as whitespace and does not advance, so the
    rest of a string that fits returns `size`.
    """
    split_at = size
    p = pos
    for char_count in range(size + 1):
        u = units[p] if p < len(units) else _NUL
        if _is_newline(u):
            return char_count
        if _is_whitespace(u):
            split_at = char_count
        if p < len(units):
            p += 1
    return split_at


def obs_caption_rows(text):
    """What OBS puts on screen for SendStreamCaption(captionText=text).

    Returns (kept, rows):
      kept -- the text libobs keeps: the C string (cut at a NUL) truncated to its first 128
              bytes by snprintf into caption_text.text[129] (obs_output_output_caption_text2
              -> caption_text_new), a half-cut trailing UTF-8 sequence dropped.
      rows -- the rows of the pop-on caption as a viewer's decoder shows them: row 0 first,
              a blank row as "" only when a later row has text, each row's leading empty
              cells as spaces (the preamble's column), cut at its first empty cell after
              that (sei_from_caption_frame writes a row while `*data` is non-empty), and
              trailing blanks stripped.  Characters are the ones written into the cells
              (EIA-608 glyph substitutions such as ' -> U+2019 are not applied).

    libcaption caption_frame_from_text(): for each row (at most SCREEN_ROWS = 15) skip the
    whitespace at the start (so '\\n', '\\r', blank lines and leading spaces never make an
    empty row; '\\n' or '\\r' always ends the row it is on), take utf8_wrap_length(data, 32)
    characters, write each into cell (row, col) if EIA-608 can show it (else the cell stays
    empty but the column is used), and go to the next row only if the row took characters.
    """
    raw = text.encode("utf-8").split(b"\x00", 1)[0]
    kept_bytes = raw[:CAPTION_LINE_BYTES]
    kept = kept_bytes.decode("utf-8", errors="ignore")
    units = list(kept)
    if len(kept.encode("utf-8")) != len(kept_bytes):
        units.append(_PARTIAL)

    grid = [[None] * SCREEN_COLS for _ in range(SCREEN_ROWS)]
    pos, row = 0, 0
    while pos < len(units) and row < SCREEN_ROWS:
        while pos < len(units) and _is_whitespace(units[pos]):
            pos += 1
        count = _wrap_length(units, pos, SCREEN_COLS)
        for col in range(count):
            u = units[pos] if pos < len(units) else _NUL
            if u is not _PARTIAL and u in EIA608_REPRESENTABLE:
                grid[row][col] = u
            if pos < len(units):
                pos += 1
        if count:
            row += 1

    rows = []
    for cells in grid:
        first = next((c for c, u in enumerate(cells) if u is not None), None)
        if first is None:
            rows.append("")
            continue
        out = []
        for u in cells[first:]:
            if u is None:
                break
            out.append(u)
        rows.append((" " * first + "".join(out)).rstrip(" \u00a0"))
    while rows and rows[-1] == "":
        rows.pop()
    return kept, rows


