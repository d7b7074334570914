"""WhatsApp's chat export (the `.txt`, or the `.zip` it comes in) to IncomingMessages.

A message starts with its date and time and the sender's name; the lines
after it without that prefix continue it. The phone's locale decides the
layout, and these are read:

    [12/31/23, 9:41:05 PM] Ann: text      iOS (a narrow no-break space before PM, U+200E marks)
    12/31/23, 9:41 PM - Ann: text         Android, 12-hour
    31/12/2023, 21:41 - Ann: text         Android, 24-hour
    31.12.23, 21:41 - Ann: text           German and other dotted locales
    2023-12-31 21:41 - Ann: text          year first

Day first or month first is decided from the whole file: a first number
above 12 anywhere means day first, a second number above 12 means month
first, both is refused. When every date is ambiguous (a chat of the 1st to
12th of months), dotted dates are day first (no locale writes M.D.Y), and
otherwise the clock decides: 12-hour times mean month first (en_US, the main
locale writing M/D/Y, uses them), 24-hour times mean day first (most locales
that write D/M/Y do).

Left out, and counted: system lines (encryption notices, "X created group",
"X added Y", subject changes: lines with no "Name:" part, or, on iOS, a text
that starts with U+200E and is no attachment) and deleted messages. Media
placeholders ("<Media omitted>", "image omitted", "<attached:
00000012-PHOTO-...jpg>", "IMG-...jpg (file attached)") become a note like
"[image]", with any caption kept.

WhatsApp writes no ids and no time zone: times stay naive (the phone's local
time), and a message's id is a hash of its time, sender, text and how many
identical messages came before it in the file, so importing the same export
again, or a later export of the same chat, adds only what is new. The
session is the chat's name, from the file name ("WhatsApp Chat with Ann.txt"),
or "whatsapp".
"""

from __future__ import annotations

import hashlib
import io
import re
import typing
import zipfile
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePath

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import InputError
from nemori_cli.importers.collect import Collector, Imported
from nemori_cli.importers.common import decode, quote
from nemori_cli.importers.peek import BOM
from nemori_cli.importers.selection import Selection

FORMAT = "whatsapp"
NAMESPACE = "whatsapp:"
EXAMPLE = "'[12/31/23, 9:41:05 PM] Name: text' or '31/12/2023, 21:41 - Name: text'"
ZIP_MAGIC = b"PK\x03\x04"
_MARKS = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"  # bidi marks around names and numbers

_DATE = r"(?P<date>\d{1,4}[./-]\d{1,2}[./-]\d{1,4})"
_TIME = r"(?P<time>\d{1,2}[:.]\d{2}(?:[:.]\d{2})?)"
_AMPM = r"(?:[ \u202f\u00a0]?(?P<ampm>[AaPp]\.?[ \u202f\u00a0]?[Mm]\.?))?"
_HEAD = re.compile(
    rf"[{_MARKS}]*(?:\[{_DATE},?[ \u00a0]{_TIME}{_AMPM}\][ \u00a0]?|{_DATE.replace('date', 'date2')},?[ \u00a0]"
    rf"{_TIME.replace('time', 'time2')}{_AMPM.replace('ampm', 'ampm2')}[ \u00a0]?[-\u2013][ \u00a0])(?P<rest>.*)",
    re.S,
)
_SENDER = re.compile(r"(?P<name>[^:\n]{1,100}?):(?: |$)(?P<text>.*)", re.S)
_DELETED = re.compile(r"(?:This message was deleted|You deleted this message)\.?", re.I)
_EDITED = re.compile(r"[ \u200e]*<This message was edited>$")
_MEDIA = [
    re.compile(r"<Media omitted>|(?:image|video|audio|sticker|GIF|document|Contact card) omitted", re.I),
    re.compile(r"<attached: (?P<file>[^>\n]+)>"),
    re.compile(r"(?P<file>\S+\.[A-Za-z0-9]{2,5}) \(file attached\)"),
]
_KINDS = [  # from a placeholder's words or an attached file's name
    ("image", re.compile(r"image|photo|IMG|\.(?:jpe?g|png|heic)$", re.I)),
    ("video", re.compile(r"video|VID|\.(?:mp4|mov|3gp)$", re.I)),
    ("audio", re.compile(r"audio|PTT|AUD|\.(?:opus|m4a|mp3|aac|ogg)$", re.I)),
    ("sticker", re.compile(r"sticker|STK|\.webp$", re.I)),
    ("gif", re.compile(r"GIF", re.I)),
    ("contact", re.compile(r"contact|\.vcf$", re.I)),
    ("document", re.compile(r"document|\.(?:pdf|docx?|xlsx?|pptx?|txt)$", re.I)),
]


@dataclass
class _Entry:
    line: int
    date: tuple[int, int, int]  # as written
    year_first: bool
    dotted: bool
    time: str
    ampm: str | None
    rest: str


def read(stream: typing.BinaryIO, source: str, selection: Selection = Selection()) -> Imported:
    head = stream.read(len(ZIP_MAGIC))
    if head == ZIP_MAGIC:
        # A file is read in place (the zip's media can be large); a pipe has to be held to be seekable.
        if stream.seekable():
            stream.seek(-len(head), io.SEEK_CUR)
            archive: typing.BinaryIO = stream
        else:
            archive = io.BytesIO(head + stream.read())
        data, chat_file = _from_zip(archive, source)
        name = _chat_name(chat_file) or _chat_name(source)
    else:
        data, name = head + stream.read(), _chat_name(source)
    entries = _entries(data, source)
    day_first = _day_first(entries, source)
    out = Collector(source, FORMAT, "WhatsApp", selection, NAMESPACE)
    session = name or "whatsapp"
    if not out.wants(session, session):
        return out.result()
    seen: Counter[tuple[str, str, str]] = Counter()
    for entry in entries:
        where = f"{source}:{entry.line}"
        timestamp = _timestamp(entry, day_first, where)
        message = _message(entry.rest)
        if isinstance(message, str):
            out.skip(message)
            continue
        speaker, text = message
        key = (timestamp.isoformat(), speaker, text)
        occurrence = seen[key]
        seen[key] += 1
        digest = hashlib.sha256("\x00".join([*key, str(occurrence)]).encode()).hexdigest()[:24]
        out.add(IncomingMessage(speaker, text, timestamp, source_id=digest, session=session, line=entry.line), where)
    return out.result()


def starts_message(line: str) -> bool:
    """Whether a line opens a WhatsApp message (a date, a time, then a name or a system note)."""
    return _HEAD.fullmatch(line) is not None


def _from_zip(stream: typing.BinaryIO, source: str) -> tuple[bytes, str]:
    """The chat's text from the zip WhatsApp shares (the chat and its media), and its member name."""
    try:
        with zipfile.ZipFile(stream) as archive:
            texts = [i for i in archive.infolist() if i.filename.lower().endswith(".txt") and not i.is_dir()]
            chats = [i for i in texts if PurePath(i.filename).name in ("_chat.txt",) or "whatsapp" in i.filename.lower()]
            chosen = chats or texts
            if len(chosen) != 1:
                names = ", ".join(quote(i.filename, 40) for i in chosen[:4]) or "none"
                raise InputError(
                    f"{source}: holds {len(chosen)} chat text files ({names}); expected a WhatsApp export zip"
                    " with one chat (_chat.txt or 'WhatsApp Chat with NAME.txt')"
                )
            return archive.read(chosen[0]), chosen[0].filename
    except InputError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, NotImplementedError, RuntimeError) as e:
        # RuntimeError: an encrypted member; NotImplementedError: a compression method Python lacks.
        reason = (str(e).splitlines() or ["unreadable"])[0][:80]
        raise InputError(f"{source}: not a readable zip ({reason}); expected the zip WhatsApp shares a chat in") from None
    except Exception as e:  # zlib.error and the like: a damaged member
        raise InputError(f"{source}: a damaged zip ({type(e).__name__}); expected the zip WhatsApp shares a chat in") from None


def _chat_name(path: str) -> str | None:
    """'WhatsApp Chat with Ann.txt' -> 'Ann'; '_chat.txt', stdin and unknown names -> None."""
    stem = PurePath(path).name
    for ext in (".txt", ".zip"):
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
    for prefix in ("WhatsApp Chat with ", "WhatsApp Chat - ", "WhatsApp-Chat mit ", "Chat de WhatsApp con "):
        if stem.startswith(prefix):
            return stem[len(prefix) :].strip() or None
    if stem in ("_chat", "<stdin>", "") or stem.startswith("<"):
        return None
    return stem


def _entries(data: bytes, source: str) -> list[_Entry]:
    """Every message with its continuation lines joined, as written (dates not yet read)."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    entries: list[_Entry] = []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        line = decode(raw.rstrip(b"\r"), source, lineno)
        m = _HEAD.fullmatch(line)
        if m is None:
            if entries:
                entries[-1].rest += "\n" + line
            elif line.strip(_MARKS + " \t"):
                raise InputError(f"{source}:{lineno}: not a WhatsApp message line; expected a date and time first, like {EXAMPLE}")
            continue
        date = m["date"] or m["date2"]
        parts = re.split(r"[./-]", date)
        entries.append(
            _Entry(
                lineno,
                (int(parts[0]), int(parts[1]), int(parts[2])),
                len(parts[0]) == 4,
                "." in date,
                m["time"] or m["time2"],
                m["ampm"] or m["ampm2"],
                m["rest"],
            )
        )
    if not entries:
        raise InputError(f"{source}: no messages (empty input); expected WhatsApp lines like {EXAMPLE}")
    for entry in entries:
        entry.rest = entry.rest.rstrip("\n")  # the blank lines before the next message, or the end
    return entries


def _day_first(entries: list[_Entry], source: str) -> bool:
    day_first = month_first = None
    for e in entries:
        if e.year_first:
            continue
        if e.date[0] > 12 and day_first is None:
            day_first = e.line
        if e.date[1] > 12 and month_first is None:
            month_first = e.line
    if day_first and month_first:
        raise InputError(
            f"{source}: the dates put the day first on line {day_first} and the month first on line {month_first};"
            " expected one date order in one chat"
        )
    if day_first or month_first:
        return bool(day_first)
    first = next((e for e in entries if not e.year_first), None)
    if first is None or first.dotted:
        return True
    return first.ampm is None


def _timestamp(entry: _Entry, day_first: bool, where: str) -> datetime:
    a, b, c = entry.date
    if entry.year_first:
        year, month, day = a, b, c
    else:
        day, month = (a, b) if day_first else (b, a)
        year = c + 2000 if c < 100 else c
    pieces = [int(p) for p in re.split(r"[:.]", entry.time)]
    hour, minute, second = pieces[0], pieces[1], pieces[2] if len(pieces) > 2 else 0
    if entry.ampm is not None:
        if not 1 <= hour <= 12:
            raise InputError(f"{where}: the time {quote(entry.time)} has AM/PM but an hour of {hour}; expected 1 to 12")
        hour = hour % 12 + (12 if entry.ampm.lower().startswith("p") else 0)
    try:
        return datetime(year, month, day, hour, minute, second)
    except ValueError:
        order = "year-month-day" if entry.year_first else ("day/month/year" if day_first else "month/day/year")
        raise InputError(
            f"{where}: {entry.date[0]}/{entry.date[1]}/{entry.date[2]} {entry.time} is not a date and time"
            f" (read as {order}); expected a date like {EXAMPLE}"
        ) from None


def _message(rest: str) -> tuple[str, str] | str:
    """(speaker, text), or the reason the line is left out."""
    m = _SENDER.fullmatch(rest)
    if m is None or '"' in m["name"] or "\u201c" in m["name"]:
        return "system"  # "Messages and calls are end-to-end encrypted...", "Ann changed the subject to "x: y""
    speaker = m["name"].strip(_MARKS + " ")
    text = m["text"]
    marked = text.startswith("\u200e")
    text = _EDITED.sub("", text.lstrip("\u200e"))
    if not speaker:
        return "system"
    if _DELETED.fullmatch(text.strip()):
        return "deleted"
    text, notes = _notes(text)
    if marked and not notes:
        return "system"  # iOS marks its own lines, written as if the chat (or a member) said them
    if not text.strip():
        return "empty"
    return speaker, text


def _notes(text: str) -> tuple[str, int]:
    """Media placeholders replaced by a note ('[image]'); and how many there were."""
    count = 0

    def note(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        what = m.groupdict().get("file") or m.group(0)
        return next((f"[{label}]" for label, pattern in _KINDS if pattern.search(what)), "[media]")

    for pattern in _MEDIA:
        text = pattern.sub(note, text)
    return text, count
