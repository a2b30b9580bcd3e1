"""A session as it is kept: the records of its log (records.py), the log file itself, written
as things happen and read back torn or whole (log.py), and the folder of saved sessions with
the resolvers that keep and read the files' bases (store.py). Nothing here runs a session:
app/core/conversation/replay.py says what each record does to a session."""
