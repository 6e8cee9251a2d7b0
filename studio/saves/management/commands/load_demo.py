"""`manage.py load_demo`: load the demo universe "The Drowned Reach" and its playthrough."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from studio.saves.demo_chapters import demo_chapters_load
from studio.saves.demo_knowledge import demo_knowledge_load
from studio.saves.demo_living import demo_living_load
from studio.universes.demo.loader import DemoDataError, demo_embed, demo_load, demo_read


class Command(BaseCommand):
    help = (
        "Load the demo universe, its Lore Book and a 48-turn save from studio/universes/demo/. "
        "Idempotent: a second run changes nothing. Also the living demo save, whose memory was "
        "recorded on a real model (studio/universes/demo/living/; imported, no LLM is called), and "
        "the 'Who knows what' save (bench/data/knowledge/scenario.json: presence, secrets, reveals). "
        "Then embed the save's turns and lore "
        "(skipped with --no-embed, or with a note when the vector store is unavailable)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--living",
            action="store_true",
            help="Put the demo save in living memory mode (default: classic).",
        )
        parser.add_argument(
            "--no-embed",
            action="store_true",
            help="Only write the database rows; do not embed anything in the vector store.",
        )
        parser.add_argument(
            "--no-knowledge",
            action="store_true",
            help="Leave out the second save, 'Who knows what' (bench/data/knowledge/scenario.json) and its secrets.",
        )
        parser.add_argument(
            "--if-missing",
            action="store_true",
            help="Do nothing when the demo universe already exists (keeps edits and play on it).",
        )

    def handle(self, *args, living: bool, no_embed: bool, if_missing: bool, no_knowledge: bool = False, **options):
        try:
            data = demo_read()
        except DemoDataError as exc:
            raise CommandError(f"The demo files are broken: {exc}") from exc

        if if_missing:
            from studio.world.models import Universe

            if Universe.objects.filter(slug=data.slug).exists():
                self.stdout.write(f"Demo universe {data.slug!r} already exists; left as it is (--if-missing).")
                return

        try:
            result = demo_load(living=living, data=data)
        except DemoDataError as exc:
            raise CommandError(str(exc)) from exc

        universe, game_save = result.universe, result.game_save
        verb = "Loaded" if result.changed else "Already up to date:"
        self.stdout.write(
            self.style.SUCCESS(
                f"{verb} demo universe {universe.name!r} ({universe.slug}) and save "
                f"{game_save.save_id!r}: {len(data.lore)} lore entries, {len(data.turns)} turns, "
                f"{game_save.memory_mode} memory."
            )
        )
        for line in result.summary_lines():
            self.stdout.write(line)
        try:
            self.stdout.write(demo_chapters_load(game_save=game_save).summary_line())
        except DemoDataError as exc:
            raise CommandError(str(exc)) from exc
        try:
            living_result = demo_living_load(universe=universe)
        except DemoDataError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(living_result.summary_line())
        knowledge = None
        if not no_knowledge:
            try:
                knowledge = demo_knowledge_load(universe=universe)
            except DemoDataError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(knowledge.summary_line())

        if no_embed:
            self.stdout.write("Embedding skipped (--no-embed).")
            return
        embedded = demo_embed(game_save=game_save, universe=universe, force=result.embedded_text_changed)
        if knowledge is not None and knowledge.game_save is not None:
            also = demo_embed(game_save=knowledge.game_save, universe=universe, force=knowledge.changed)
            for note in also.notes:
                self.stdout.write(note if also.ok else self.style.WARNING(note))
        for note in embedded.notes:
            self.stdout.write(note if embedded.ok else self.style.WARNING(note))
