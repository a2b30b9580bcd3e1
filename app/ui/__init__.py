"""The terminal front-end (Textual only): the app shell, the main screen that routes, the action
table; panes/ hold each pane's behaviour, widgets/ what draws, dialogs/ the modal screens."""
