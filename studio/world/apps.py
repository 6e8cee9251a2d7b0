from django.apps import AppConfig


class WorldConfig(AppConfig):
    """The world's rows, below every other app: a universe and its Lore Book, a save and its turns.

    Models and their invariants only (no services, no pages, no admin): the engine and the apps
    above import them. Their tables kept the names of the apps they came from (`Meta.db_table`).
    """

    name = "studio.world"
    verbose_name = "World"
