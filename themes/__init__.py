"""steer's stylesheet and built-in themes (installed as the package `app.themes`)."""
