"""A folder held open by its descriptor: every file a save makes, reads, renames or removes is
found by name within that very folder (the system's *at() calls), never by a path looked up
again. A link or another folder swapped in for it while a run measures, or for any folder
above it, then changes nothing of where the files go. Where the system has no such calls
(Windows), names are joined to the folder's path, as before."""
import contextlib
import errno
import os
import stat

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # POSIX's: the last step of a name is never a link
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # POSIX's: opening a FIFO never waits
NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW  # a new file: never one already there
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
BY_DESCRIPTOR = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd


class Held:
    """A folder, open: its descriptor (None where names are joined to its path) and its path,
    which only messages use."""

    def __init__(self, fd, path):
        self.fd, self.path = fd, path

    def __str__(self):
        return self.path

    def at(self, name):
        """name's path, for messages: where the file was when the folder was opened."""
        return os.path.join(self.path, name)

    def _name(self, name):
        return name if self.fd is not None else os.path.join(self.path, name)

    def open(self, name, flags, mode=0o666):
        """os.open of a file of this folder, never through a link."""
        return os.open(self._name(name), flags | NOFOLLOW, mode, dir_fd=self.fd)

    def lstat(self, name):
        return os.stat(self._name(name), dir_fd=self.fd, follow_symlinks=False)

    def exists(self, name):
        """Whether anything (a link too) holds name."""
        try:
            self.lstat(name)
        except FileNotFoundError:
            return False
        return True

    def kind(self, name):
        """What holds name: its stat mode's file type, or None where nothing does."""
        try:
            return stat.S_IFMT(self.lstat(name).st_mode)
        except FileNotFoundError:
            return None

    def names(self):
        return os.listdir(self.fd if self.fd is not None else self.path)

    def replace(self, old, new):
        os.replace(self._name(old), self._name(new), src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name):
        os.unlink(self._name(name), dir_fd=self.fd)

    def mkdir(self, name):
        os.mkdir(self._name(name), dir_fd=self.fd)

    def rmdir(self, name):
        os.rmdir(self._name(name), dir_fd=self.fd)

    def read(self, name, limit):
        """The bytes of a regular file of this folder, up to limit + 1 of them, or None where
        name is no regular file (a link is never followed; a FIFO never waited for)."""
        try:
            fd = self.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            if isinstance(e, PermissionError):
                raise
            return None  # a link (ELOOP), or what cannot be opened so
        with os.fdopen(fd, "rb") as f:
            return f.read(limit + 1) if stat.S_ISREG(os.fstat(fd).st_mode) else None


def of(folder):
    """A Held for a folder given by its path, looked up by path each time (a reader's view: it
    writes nothing); a Held is itself."""
    return folder if isinstance(folder, Held) else Held(None, folder)


@contextlib.contextmanager
def opened(path, within=None, follow=False):
    """The folder at path, held open while the block runs: -> Held. Its last step is never a
    link (a link swapped in for it is refused with OSError) unless follow (a folder the user
    named), and a folder above it is looked up once, here. within: the folder (a Held, or a
    path) that holds this one, path then a name in it."""
    within = None if within is None else of(within)
    name, dir_fd = (path, None) if within is None else (within._name(path), within.fd)
    if not BY_DESCRIPTOR:
        if (os.path.islink(name) and not follow) or not os.path.isdir(name):
            raise OSError(f"{shown(path, within)} is a link or not a folder")
        yield Held(None, name)
        return
    try:
        fd = os.open(name, os.O_RDONLY | DIRECTORY | (0 if follow else NOFOLLOW), dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):  # a link, or a file, where a folder is to be
            raise OSError(f"{shown(path, within)} is a link or not a folder; nothing is saved "
                          f"through it") from None
        raise
    try:
        yield Held(fd, shown(path, within))
    finally:
        os.close(fd)


def shown(path, within):
    return path if within is None else within.at(path)


def plain_name(name):
    """A file name in a folder: no folder part, nothing that climbs out, no NUL."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "\0" not in name
            and os.path.basename(name) == name and "/" not in name and os.sep not in name)
