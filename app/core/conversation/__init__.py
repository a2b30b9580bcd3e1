"""The live conversation about a change set: turns, steering, the queue and the records they
make (session.py); the answer streaming now (answer.py); what the model is sent (context.py,
prompts.py); agents (agent.py); saving, resuming and rewinding a session (saving.py,
resume.py, rewind.py). The change set itself is app/core/review/; its log's format is
app/core/storage/."""
