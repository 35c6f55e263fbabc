"""How the app looks: icons (tray states, lock states) and the light/dark theme."""
