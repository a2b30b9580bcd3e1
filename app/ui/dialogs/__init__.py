"""The modal screens: they ask and choose (help, a question, reject's reason, rewind, commit,
an agent's permission, a paste shown whole, the inline hunk editor); the panes act on the answer."""
