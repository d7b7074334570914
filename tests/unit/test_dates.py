"""Relative time expressions resolved against a message's timestamp.

Expected dates are computed by hand (calendar in the comments), not by the
code under test.
"""

from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemori_cli.dates import (
    TimeMention,
    annotate_relative_times,
    find_relative_times,
    format_date,
    shift_months,
    spell_iso_dates,
)

# Monday 8 May 2023, 13:56. Its week runs Mon 8 - Sun 14 May; the week before
# Mon 1 - Sun 7; the week after Mon 15 - Sun 21.
MON = datetime(2023, 5, 8, 13, 56)


def one(text: str, anchor=MON) -> TimeMention:
    mentions = find_relative_times(text, anchor)
    assert len(mentions) == 1, mentions
    return mentions[0]


def resolved(text: str, anchor=MON) -> str:
    return one(text, anchor).resolved


def test_format_date_is_plain_english():
    assert format_date(date(2023, 5, 7)) == "7 May 2023"
    assert format_date(date(2024, 12, 25)) == "25 December 2024"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("today", "8 May 2023"),
        ("tonight", "8 May 2023"),
        ("this morning", "8 May 2023"),
        ("this afternoon", "8 May 2023"),
        ("this evening", "8 May 2023"),
        ("yesterday", "7 May 2023"),
        ("last night", "7 May 2023"),
        ("the day before yesterday", "6 May 2023"),
        ("tomorrow", "9 May 2023"),
        ("the day after tomorrow", "10 May 2023"),
        ("3 days ago", "5 May 2023"),
        ("three days ago", "5 May 2023"),
        ("a day ago", "7 May 2023"),
        ("a couple of days ago", "6 May 2023"),
        ("couple days ago", "6 May 2023"),
        ("ten days ago", "28 April 2023"),
        ("2 days from now", "10 May 2023"),
        ("in 3 days", "11 May 2023"),
        ("in a week", "the week of 15 May 2023"),
        ("in two weeks", "the week of 22 May 2023"),
        ("a week ago", "the week of 1 May 2023"),
        ("two weeks ago", "the week of 24 April 2023"),
        ("a month ago", "April 2023"),
        ("2 months ago", "March 2023"),
        ("twelve months ago", "May 2022"),
        ("a year ago", "2022"),
        ("5 years ago", "2018"),
        ("last week", "the week of 1 May 2023"),
        ("this week", "the week of 8 May 2023"),
        ("next week", "the week of 15 May 2023"),
        ("last month", "April 2023"),
        ("this month", "May 2023"),
        ("next month", "June 2023"),
        ("last year", "2022"),
        ("this year", "2023"),
        ("next year", "2024"),
        ("last weekend", "the weekend of 6-7 May 2023"),
        ("this past weekend", "the weekend of 6-7 May 2023"),
        ("this weekend", "the weekend of 13-14 May 2023"),
        ("next weekend", "the weekend of 20-21 May 2023"),
        ("last Saturday", "6 May 2023"),
        ("last Monday", "1 May 2023"),  # strictly before a Monday anchor
        ("this past Friday", "5 May 2023"),
        ("next Friday", "12 May 2023"),
        ("next Monday", "15 May 2023"),  # strictly after
        ("this coming Tuesday", "9 May 2023"),
        ("this Friday", "12 May 2023"),
        ("this Sunday", "14 May 2023"),
        ("this Monday", "8 May 2023"),
    ],
)
def test_resolves_against_a_monday(text, expected):
    assert resolved(f"We talked about it {text}.") == expected


def test_granularity_and_representative_date():
    cases = {
        "yesterday": (date(2023, 5, 7), "day"),
        "two weeks ago": (date(2023, 4, 24), "week"),  # the Monday of that week
        "last weekend": (date(2023, 5, 6), "weekend"),  # its Saturday
        "last month": (date(2023, 4, 1), "month"),
        "last year": (date(2022, 1, 1), "year"),
    }
    for text, (day, granularity) in cases.items():
        mention = one(text)
        assert (mention.date, mention.granularity) == (day, granularity), text


def test_annotate_inserts_after_the_expression():
    assert annotate_relative_times("I went yesterday.", MON) == "I went yesterday [7 May 2023]."
    assert (
        annotate_relative_times("Last week I ran; next Friday I rest.", MON)
        == "Last week [the week of 1 May 2023] I ran; next Friday [12 May 2023] I rest."
    )
    assert annotate_relative_times("Nothing relative here.", MON) == "Nothing relative here."


def test_annotate_is_idempotent():
    text = "Yesterday I said I'd go this weekend, and 2 months ago I said so too."
    once = annotate_relative_times(text, MON)
    assert once == (
        "Yesterday [7 May 2023] I said I'd go this weekend [the weekend of 13-14 May 2023], and 2 months ago [March 2023] I said so too."
    )
    assert annotate_relative_times(once, MON) == once


def test_annotate_fills_in_only_the_missing_ones():
    text = "yesterday [7 May 2023] and tomorrow"
    assert annotate_relative_times(text, MON) == "yesterday [7 May 2023] and tomorrow [9 May 2023]"


def test_offsets_and_text_as_written():
    text = "On Monday, YESTERDAY's gig was better than Last Week's."
    first, second = find_relative_times(text, MON)
    assert (first.start, first.end, first.text) == (11, 20, "YESTERDAY")
    assert (second.start, second.end, second.text) == (43, 52, "Last Week")
    for m in (first, second):
        assert text[m.start : m.end] == m.text


def test_longest_match_wins_and_nothing_overlaps():
    text = "the day before yesterday and the day after tomorrow"
    mentions = find_relative_times(text, MON)
    assert [m.text for m in mentions] == ["the day before yesterday", "the day after tomorrow"]
    assert [m.resolved for m in mentions] == ["6 May 2023", "10 May 2023"]
    assert one("This weekend").granularity == "weekend"  # not "this week" + "end"
    assert one("a couple of weeks ago").resolved == "the week of 24 April 2023"


def test_whitespace_and_newlines_inside_an_expression():
    assert resolved("the day\nbefore  yesterday") == "6 May 2023"


@pytest.mark.parametrize(
    "text",
    [
        "The yesterdays song",
        "Lastly, the weekday schedule",
        "todays and tomorrows",
        "nextweek thisyear",
        "on Friday we met",  # bare weekday: which Friday is ambiguous
        "Friday was fun",
        "a few days ago",  # vague
        "several weeks ago",
        "the last week of the project",
        "the next month was hard",
        "last week of May",
        "in the last year",
        "last time, next time, this time",
        "the last Saturday of the month",
        "two or three days ago",
        "2-3 weeks ago",
        "1.5 years ago",
        "in a day or two",
        "within 3 days",
        "this past month",  # the last 30 days, not a calendar month
    ],
)
def test_no_false_positives(text):
    assert find_relative_times(text, MON) == []
    assert annotate_relative_times(text, MON) == text


def test_sunday_anchor():
    sun = datetime(2023, 5, 14, 9, 0)  # Sunday; its week is Mon 8 - Sun 14 May
    assert resolved("last Sunday", sun) == "7 May 2023"  # 7 days back, not today
    assert resolved("next Sunday", sun) == "21 May 2023"
    assert resolved("this Friday", sun) == "12 May 2023"  # already past, same week
    assert resolved("last weekend", sun) == "the weekend of 6-7 May 2023"


def test_year_boundary():
    tue = datetime(2023, 1, 3, 10, 0)  # Tuesday 3 January 2023
    assert resolved("last month", tue) == "December 2022"
    assert one("last month", tue).date == date(2022, 12, 1)
    assert resolved("last year", tue) == "2022"
    assert resolved("last week", tue) == "the week of 26 December 2022"
    assert resolved("3 days ago", tue) == "31 December 2022"
    # Sat 31 Dec 2022 + Sun 1 Jan 2023 is one weekend across two years.
    assert resolved("last weekend", tue) == "the weekend of 31 December 2022 - 1 January 2023"


def test_weekend_across_months():
    mon = date(2023, 10, 2)  # Monday; Sat 30 Sep, Sun 1 Oct before it
    assert resolved("last weekend", mon) == "the weekend of 30 September - 1 October 2023"


def test_leap_day():
    leap = datetime(2024, 2, 29, 12, 0)  # Thursday
    assert resolved("yesterday", leap) == "28 February 2024"
    assert resolved("tomorrow", leap) == "1 March 2024"
    assert resolved("a month ago", leap) == "January 2024"
    assert resolved("a year ago", leap) == "2023"
    assert resolved("next weekend", leap) == "the weekend of 9-10 March 2024"


def test_month_arithmetic_clamps_the_day():
    assert shift_months(date(2023, 3, 31), -1) == date(2023, 2, 28)
    assert shift_months(date(2024, 3, 31), -1) == date(2024, 2, 29)
    assert shift_months(date(2024, 2, 29), 12) == date(2025, 2, 28)
    assert shift_months(date(2023, 1, 15), -1) == date(2022, 12, 15)
    assert resolved("a month ago", date(2023, 3, 31)) == "February 2023"


def test_anchor_may_be_date_or_aware_datetime():
    assert find_relative_times("yesterday", MON) == find_relative_times("yesterday", MON.date())
    # An aware timestamp is read on its own calendar day, not converted to UTC.
    late = datetime(2023, 5, 8, 23, 30, tzinfo=timezone(timedelta(hours=-7)))
    assert resolved("today", late) == "8 May 2023"


def test_out_of_range_is_skipped_not_raised():
    assert find_relative_times("999 years ago", date(5, 1, 1)) == []


@pytest.mark.parametrize(
    "text, spelled",
    [
        ("2023-10", "October 2023"),
        ("2023-06-16", "16 June 2023"),
        ("from 2023-01-05 to 2023-02", "from 5 January 2023 to February 2023"),
        ("2023-13", "2023-13"),  # no month 13
        ("2023-02-30", "2023-02-30"),  # no 30 February
        ("2020-2023", "2020-2023"),  # a span of years
        ("call 555-1234-56", "call 555-1234-56"),  # digits run on: not a date
        ("12023-10", "12023-10"),
    ],
)
def test_iso_dates_in_text_are_written_as_format_date_writes_them(text, spelled):
    assert spell_iso_dates(text) == spelled


@given(st.dates(min_value=date(1000, 1, 1), max_value=date(9999, 12, 31)))
def test_every_iso_day_is_spelled_as_its_own_date(day):
    assert spell_iso_dates(f"on {day.isoformat()}.") == f"on {format_date(day)}."
