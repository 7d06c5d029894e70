"""``nbgrader collect`` that takes only what each student really handed in.

nbgrader's exchange keeps submissions in ``<exchange>/<course>/inbound``, a folder every
student may write into. Its own collect trusts the folder's name: a folder named for a
classmate is collected as theirs (the owner check only warns), the newest date in a name
wins (so a folder dated 2099 replaces an honest one), and one folder with a garbage date or a
missing file stops the collect of the whole class. The kit's course configuration
(``kit/course/nbgrader_config.py``) uses :class:`Collect` instead, which skips a folder, and
names it with the reason, when

* it is a link, or not owned by the account it is named for;
* its date does not parse, or lies in the future;
* its ``timestamp.txt`` or ``submission_secret.txt`` is missing, empty, not a plain file,
  or (the timestamp) does not parse;
* anything inside it is a link or not a plain file or folder (a link to the grader's own
  files would be collected as the student's work).

Of the folders left, each student's newest is collected, as nbgrader does.
"""
from __future__ import annotations

import glob
import os
import pwd
import stat
from datetime import datetime, timedelta, timezone

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import parse_utc

#: a submission's date may be this far ahead of the grader's clock (clocks differ a little)
CLOCK_SLACK = timedelta(minutes=5)
#: the files nbgrader's submit writes next to the notebooks, and their largest size
REQUIRED = ("timestamp.txt", "submission_secret.txt")
SMALL = 4096


def _utc(when: datetime) -> datetime:
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _small_file(folder: str, name: str) -> str:
    """The text of a plain, non-empty small file in ``folder``; ValueError saying why not."""
    path = os.path.join(folder, name)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise ValueError(f"it has no {name}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"its {name} is not a plain file")
    if not 0 < info.st_size <= SMALL:
        raise ValueError(f"its {name} is empty" if info.st_size == 0 else
                         f"its {name} is over {SMALL} bytes")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, errors="replace") as f:
        text = f.read(SMALL).strip()
    if not text:
        raise ValueError(f"its {name} is empty")
    return text


def check(path: str, now: datetime) -> dict:
    """``{'username', 'filename', 'timestamp'}`` of an inbound folder nbgrader may collect;
    ValueError with the reason for one it must not."""
    filename = os.path.basename(path)
    parts = filename.rsplit("+", 3)
    if len(parts) < 3:
        raise ValueError("its name is not student+assignment+date")
    username = parts[0]
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise ValueError("it is a link or not a folder")
    try:
        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = f"uid {info.st_uid}"
    if owner != username:
        raise ValueError(f"it is named for {username} but was handed in by {owner}")
    try:
        timestamp = _utc(parse_utc(parts[2]))
    except (ValueError, OverflowError):
        raise ValueError(f"its date {parts[2][:40]!r} is not a date") from None
    if timestamp > now + CLOCK_SLACK:
        raise ValueError(f"its date {parts[2][:40]} is in the future")
    stamp = _small_file(path, REQUIRED[0])
    try:
        parse_utc(stamp)
    except (ValueError, OverflowError):
        raise ValueError(f"its {REQUIRED[0]} is not a date") from None
    _small_file(path, REQUIRED[1])
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            mode = os.lstat(os.path.join(root, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                rel = os.path.relpath(os.path.join(root, name), path)
                raise ValueError(f"{rel} in it is a link or not a plain file")
    return {"username": username, "filename": filename, "timestamp": timestamp}


class Collect(ExchangeCollect):
    """nbgrader's collect, given only the inbound folders :func:`check` accepts."""

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        student = self.coursedir.student_id or "*"
        pattern = os.path.join(glob.escape(self.inbound_path),
                               f"{student}+{self.coursedir.assignment_id}+*")
        now, newest = datetime.now(timezone.utc), {}
        for path in sorted(glob.glob(pattern)):
            try:
                rec = check(path, now)
            except (ValueError, OSError) as e:
                self.log.warning("Skipped %s: %s", path, e)
                continue
            newest.setdefault(rec["username"], []).append(rec)
        duedate = self._duedate()
        self.src_records = []
        for records in newest.values():
            records.sort(key=lambda r: r["timestamp"], reverse=True)
            on_time = [r for r in records if duedate and r["timestamp"] <= duedate]
            self.src_records.append(on_time[0] if self.before_duedate and on_time
                                    else records[0])

    def _duedate(self) -> datetime | None:
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                due = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                return None
        return _utc(due) if due else None
