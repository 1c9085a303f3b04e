"""The report: a file the suite writes and a user may edit. Its last line holds the digest of
the rest, so that an edit anywhere tells (edited()), and a save keeps an edited one in history/
before it replaces it (history.keep_edited)."""
import hashlib
import os

from harness.keeping import held, schema


REPORT = "report.md"  # the folder's report, made anew from its results by every save
SIGNATURE = "<!-- made by the suite: sha256 {} -->\n"  # its last line: the digest of the rest


def signed(text):
    """The report's text, with a last line that holds the digest of the rest: an edit anywhere
    changes one without the other (edited())."""
    return text + SIGNATURE.format(hashlib.sha256(text.encode("utf-8")).hexdigest())


def edited(path, raw=None):
    """Whether the regular file at path (or its bytes, raw, read already) is not what the suite
    last wrote there: its last line is not the digest of the rest (an edit; or a report of a
    version that signed none). False where there is no regular file (a link is never read)."""
    if raw is None:
        folder, name = os.path.split(path)
        try:
            raw = held.of(folder or os.curdir).read(name, schema.FILE_MAX)
        except OSError:
            return False
    if raw is None:
        return False
    text = raw.decode("utf-8", "replace")
    body, _, last = text.rstrip("\n").rpartition("\n")
    return last + "\n" != SIGNATURE.format(hashlib.sha256((body + "\n").encode(
        "utf-8")).hexdigest())
