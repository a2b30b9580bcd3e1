"""What draws, pane by pane: the diff, the conversation, the file tree, the prompt, the queue,
the key bar and one-line labels, with syntax colours and the welcome; no session, no intents."""
