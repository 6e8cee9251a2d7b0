"""Long play: chapters of a save's turns, arcs of chapters, their summaries, story time.

- `models`: the Chapter row (a closed chapter, or an arc of level >= 1) and its summary.
- `services`: closing a chapter (the playtester, a scene change, every N turns), rolling
  chapters up into arcs, the playtester's summary edit (an override).
- `summarize`: the `summarize` LLM operation and the job that runs it on a closed chapter.
- `selectors`: the open chapter, the chapters and arcs for pages and the API.
- `story`: the story-so-far layer of the memory context (summaries, the chapter's turns).
- `story_time`: the story time a turn's state records (`date`, `day`, `time`).
- `named_time`: a turn's point in story time, and the time a query names as ranges of it.
- `timeline`: the chapters' registration with the timeline registry (rewind, fork, file).
"""
