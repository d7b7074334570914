"""Input formats: files of messages (nemori's JSON Lines, LoCoMo, chat exports) to IncomingMessages.

An adapter layer: it knows file formats and nothing of memory. Each reader
turns every problem a user can cause into one InputError line naming the
source, the position and what was expected.
"""
