"""What the engine hands back for a turn: the parameters of a search and of the context with
their one set of limits (`query_params`), the clamped search (`search`, with the turns a
named time prefers from `temporal`), the memory context
within a token budget (`context`, with the Lore Book's part in `context_lore` and the
`{{user}}` / `{{char}}` macros in `macros`), and replay after a lore change (`replay`)."""
