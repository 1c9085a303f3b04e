"""One cleaning step for text that comes from a file (a results file, a journal, a folder's
name) on its way into Markdown (report.md): nothing a file holds becomes markup (a CSV cell's is
keeping/exports.for_csv; the terminal's, terminal.printable)."""
import re

from harness.terminal import printable

INLINE = re.compile(r"([\\`*<>\[\]#~|&]|(?<![^\W_])_|_(?![^\W_]))")  # what makes emphasis,
#   code, links, HTML, headings, strikethrough, a table's edge or an entity: each escaped, shown
#   as itself; an underscore but one between two letters or digits (a run of them, as in
#   __init__, made emphasis of what they held where only their outer ones were escaped)
LINE_START = re.compile(r"^(\d+)([.)])|^([=+\-])")  # what makes a list, a rule or a heading
#   at a line's start (the other block marks are escaped inline above)
BARE_LINK = re.compile(r"(?i)(www)\.|(https?|ftp|mailto|xmpp)(:)")  # GFM's autolinks: never one
JOIN = "\u2060"  # an invisible word joiner before every "@": GFM makes an e-mail address a link
#   whatever escapes its characters (an escaped "@" or "." is read back before it looks)


def for_markdown(text):
    """Text as Markdown shows it, character for character, on one line: nothing in it makes
    emphasis, a link, markup, a table's edge, a list, a rule, a heading or a code block. An
    underscore inside a word (KMP_DUPLICATE_LIB_OK) is left as it is: it makes none."""
    text = INLINE.sub(r"\\\1", printable(text)).replace("@", JOIN + "@")
    text = BARE_LINK.sub(lambda m: f"{m[1]}\\." if m[1] else f"{m[2]}\\:", text)
    text = LINE_START.sub(lambda m: f"{m[1]}\\{m[2]}" if m[1] else f"\\{m[3]}", text)
    spaces = len(text) - len(text.lstrip(" "))
    return "&#32;" * spaces + text[spaces:]  # leading spaces shown, never a code block


def for_cell(text):
    """Text in a Markdown table's cell: as for_markdown shows it inline (a cell is never a line's
    start), a '|' never ending the cell."""
    text = INLINE.sub(r"\\\1", printable(text)).replace("@", JOIN + "@")
    return BARE_LINK.sub(lambda m: f"{m[1]}\\." if m[1] else f"{m[2]}\\:", text)
