"""Doc inheritance: an undocumented override is found by the doc of the method it overrides."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.codeindex.conftest import git
from xihe.tools.codeindex import inherit
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.inherit import arity, bases_of
from xihe.tools.codeindex.languages import Parsers
from xihe.tools.codeindex.service import index_repo, open_index
from xihe.tools.codeindex.units import CodeUnit, parse_units

TRANSPORT = """package net;

/** What moves requests. */
public interface Transport {
  /**
   * Deliver the payload over a pooled connection and wait for the acknowledgement.
   */
  void send(Request request, Map<String, List<String>> headers);

  /** Release every descriptor the channel holds. */
  void close();
}
"""

ABSTRACT = """package net;

/** Shared parts. */
public abstract class AbstractTransport<T extends Request> implements Transport, AutoCloseable {
  protected int retries;
}
"""

SOCKET = """package net;

public final class SocketTransport extends AbstractTransport<Request> {
  @Override
  public void send(Request request, Map<String, List<String>> headers) {
    writer.write(request.bytes());
    reader.awaitAck();
  }

  /** {@inheritDoc} Also flushes the writer first. */
  @Override
  public void close() {
    writer.flush();
    sock.shutdown();
  }

  public void send(Request request) {
    writer.write(request.bytes());
  }

  public SocketTransport() {
    retries = 3;
  }
}
"""

UNRELATED = """package other;

public class Mailbox {
  public void send(Request request, Map<String, List<String>> headers) {
    queue.push(request);
  }
}
"""

BASE_PY = '''class BaseTrigger(six.with_metaclass(ABCMeta)):
    """A trigger."""

    def get_next_fire_time(self, previous_fire_time, now):
        """Compute the moment the job runs again, from the previous firing and the current instant."""
        raise NotImplementedError

    def describe(self):
        """Explain the schedule in words for humans."""
        return type(self).__name__ + str(self.fields)
'''

INTERVAL_PY = """from .base import BaseTrigger


class IntervalTrigger(BaseTrigger, metaclass=Meta):
    def __init__(self, seconds):
        self.seconds = seconds

    def get_next_fire_time(self, previous_fire_time, now):
        return (previous_fire_time or now) + self.seconds

    def describe(self):
        return "every %d seconds" % self.seconds
"""

FILES = {
    "src/net/Transport.java": TRANSPORT,
    "src/net/AbstractTransport.java": ABSTRACT,
    "src/net/SocketTransport.java": SOCKET,
    "src/other/Mailbox.java": UNRELATED,
    "py/base.py": BASE_PY,
    "py/interval.py": INTERVAL_PY,
}
QUESTION = "deliver the payload over a pooled connection and wait for the acknowledgement"


def units_of(idx: CodeIndex, qualname: str) -> list[CodeUnit]:
    return [u for u in idx.live_units if u.qualname == qualname]


def rank(idx: CodeIndex, query: str, qualname: str, mode: str = "hybrid") -> int | None:
    hits = idx.search(query, 10, mode).hits
    return next((i for i, h in enumerate(hits, 1) if h.unit.qualname == qualname), None)


def test_bases_read_from_java_and_python_class_signatures() -> None:
    parsers = Parsers()
    abstract = parse_units("A.java", ABSTRACT, "java", parsers)
    socket = parse_units("S.java", SOCKET, "java", parsers)
    interval = parse_units("i.py", INTERVAL_PY, "python", parsers)
    base = parse_units("b.py", BASE_PY, "python", parsers)
    cls = {u.qualname: u for u in [*abstract, *socket, *interval, *base] if u.kind == "class"}
    assert bases_of(cls["AbstractTransport"]) == ("Transport", "AutoCloseable")
    assert bases_of(cls["SocketTransport"]) == ("AbstractTransport",)
    assert bases_of(cls["IntervalTrigger"]) == ("BaseTrigger",)  # metaclass= is not a base
    assert bases_of(cls["BaseTrigger"]) == ()  # six.with_metaclass(...) is a call, not a class name
    sends = sorted(arity(u) or 0 for u in socket if u.name == "send")
    assert sends == [1, 2]  # Map<String, List<String>> is one parameter


def test_java_override_inherits_through_superclass_and_interface(make_repo, cfg, embedder) -> None:
    idx, _ = index_repo(make_repo(FILES), cfg, embedder=embedder)
    two, one = sorted(units_of(idx, "SocketTransport.send"), key=lambda u: -len(u.signature))
    assert two.doc == "" and two.inherited_doc.startswith("Deliver the payload over a pooled connection")
    assert one.inherited_doc == ""  # send(Request) overrides nothing: arity differs
    assert units_of(idx, "Mailbox.send")[0].inherited_doc == ""  # same name, no supertype
    assert units_of(idx, "SocketTransport.SocketTransport")[0].inherited_doc == ""  # a constructor
    close = units_of(idx, "SocketTransport.close")[0]
    assert close.inherited_doc == "Release every descriptor the channel holds. Also flushes the writer first."
    # the implementation's own text has none of the question's words: BM25 finds it by the inherited doc
    assert rank(idx, QUESTION, "SocketTransport.send", "bm25") is not None
    assert (rank(idx, QUESTION, "SocketTransport.send") or 99) <= 3
    # the inherited doc counts a little less: the documented declaration stays first (inherit.PENALTY)
    assert rank(idx, QUESTION, "Transport.send") == 1
    assert rank(idx, QUESTION, "Mailbox.send", "bm25") is None
    assert (rank(idx, "release every descriptor the channel holds", "SocketTransport.close") or 99) <= 3


def test_python_override_inherits_the_base_method_doc(make_repo, cfg, embedder) -> None:
    idx, _ = index_repo(make_repo(FILES), cfg, embedder=embedder)
    unit = units_of(idx, "IntervalTrigger.get_next_fire_time")[0]
    assert unit.doc == "" and unit.inherited_doc.startswith("Compute the moment the job runs again")
    assert units_of(idx, "IntervalTrigger.__init__")[0].inherited_doc == ""
    # a documented base method with code answers for itself: its override does not take its doc
    assert units_of(idx, "IntervalTrigger.describe")[0].inherited_doc == ""
    question = "compute the moment the job runs again from the previous firing and the current instant"
    assert rank(idx, question, "IntervalTrigger.get_next_fire_time", "bm25") is not None
    assert (rank(idx, question, "IntervalTrigger.get_next_fire_time") or 99) <= 3


def test_an_edited_interface_doc_reaches_implementations_on_the_next_update(make_repo, cfg, embedder) -> None:
    repo = make_repo(FILES)
    index_repo(repo, cfg, embedder=embedder)
    edited = TRANSPORT.replace(
        "Deliver the payload over a pooled connection and wait for the acknowledgement.",
        "Stream the envelope through a multiplexed tunnel until the receipt arrives.",
    )
    (repo / "src/net/Transport.java").write_text(edited, encoding="utf-8")
    git(repo, "commit", "-qam", "reword")
    idx, rep = index_repo(repo, cfg, embedder=embedder)
    assert rep.mode == "incremental"
    # the implementing file is re-indexed with the interface; an unrelated Java file is not
    assert {"src/net/Transport.java", "src/net/SocketTransport.java"} <= set(rep.files_changed)
    assert "src/other/Mailbox.java" not in rep.files_changed and "py/base.py" not in rep.files_changed
    new_question = "stream the envelope through a multiplexed tunnel until the receipt arrives"
    assert rank(idx, new_question, "SocketTransport.send", "bm25") is not None
    assert rank(idx, QUESTION, "SocketTransport.send", "bm25") is None
    loaded = open_index(repo, cfg, embedder)  # what was saved is what a restart sees
    assert loaded is not None
    assert max(u.inherited_doc for u in units_of(loaded, "SocketTransport.send")).startswith("Stream")


def test_removing_the_doc_source_clears_the_inherited_doc(make_repo, cfg, embedder) -> None:
    repo = make_repo(FILES)
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    (repo / "py/base.py").unlink()
    stats = idx.update_files(["py/base.py"])
    assert "py/interval.py" in stats.changed
    assert units_of(idx, "IntervalTrigger.get_next_fire_time")[0].inherited_doc == ""


def test_inherited_docs_do_not_become_docstring_questions(make_repo, cfg, embedder, tmp_path: Path) -> None:
    from xihe.tools.codeindex.heldout import docstring_questions

    idx, _ = index_repo(make_repo(FILES), cfg, embedder=embedder)
    targets = {t for q in docstring_questions(idx, ("java", "python"), 50, ()) for t in q.targets}
    assert ("src/net/Transport.java", "Transport.send") in targets
    assert not any(qual.startswith(("SocketTransport", "IntervalTrigger")) for _, qual in targets)


def test_an_edit_that_keeps_classes_and_docs_does_not_look_for_stale_files(
    make_repo, cfg, embedder, monkeypatch
) -> None:
    repo = make_repo(FILES)
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    looked: list[set[str]] = []
    real = inherit.stale_files

    def spy(live, new, changed):  # type: ignore[no-untyped-def]
        looked.append(set(changed))
        return real(live, new, changed)

    monkeypatch.setattr(inherit, "stale_files", spy)
    body = TRANSPORT.replace("  void close();\n", "  void close();\n\n  int pending();\n")
    (repo / "src/net/Transport.java").write_text(body, encoding="utf-8")
    stats = idx.update_files(["src/net/Transport.java"])  # a new method: the shape changed
    assert looked == [{"src/net/Transport.java"}] and stats.changed == ["src/net/Transport.java"]
    (repo / "src/net/Transport.java").write_text(body.replace("package net;", "package net;\n\n"), "utf-8")
    stats = idx.update_files(["src/net/Transport.java"])  # lines moved, nothing others inherit changed
    assert len(looked) == 1 and stats.changed == ["src/net/Transport.java"]
    doc = body.replace("Release every descriptor", "Free every descriptor")
    (repo / "src/net/Transport.java").write_text(doc, encoding="utf-8")
    idx.update_files(["src/net/Transport.java"])  # a doc others may inherit: looked for again
    assert len(looked) == 2


def _ids(table: inherit.Supertypes) -> tuple[dict, dict, dict]:
    """The table's entries as the identities of its units, in order."""
    return (
        {k: [id(u) for u in v] for k, v in table.classes.items()},
        {k: id(u) for k, u in table.by_qual.items()},
        {k: [id(u) for u in v] for k, v in table.methods.items()},
    )


def test_the_table_kept_across_updates_is_the_one_every_live_unit_makes(make_repo, cfg, embedder) -> None:
    repo = make_repo(FILES)
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    cron = "from .base import BaseTrigger\n\n\nclass CronTrigger(BaseTrigger):\n"
    cron += "    def get_next_fire_time(self, previous_fire_time, now):\n        return now\n"
    twice = '\n\nclass BaseTrigger:\n    def describe(self):\n        """Say it twice."""\n        raise NotImplementedError\n'
    edits = [
        ("py/base.py", BASE_PY.replace("Compute the moment", "Work out the moment")),  # a doc others inherit
        ("py/cron.py", cron),  # a new subclass
        ("src/net/Transport.java", TRANSPORT.replace("  void close();\n", "")),  # a method gone
        ("py/interval.py", None),  # a file gone
        ("py/base.py", BASE_PY + twice),  # a class defined twice in one file
        ("py/interval.py", INTERVAL_PY),  # back again
    ]
    for rel, text in edits:
        if text is None:
            (repo / rel).unlink()
        else:
            (repo / rel).write_text(text, encoding="utf-8")
        idx.update_files([rel])
        live = idx.live_units
        assert _ids(idx._supertypes()) == _ids(inherit.Supertypes(live)), rel
        # each unit's inherited doc is the one resolving every live unit at once gives
        bare = [replace(u, inherited_doc="") for u in live]
        want = [u.inherited_doc for u in inherit.resolve(bare, inherit.Supertypes)]
        assert [u.inherited_doc for u in live] == want, rel
        if rel == "py/cron.py":  # the edited base doc reached the new subclass
            assert units_of(idx, "CronTrigger.get_next_fire_time")[0].inherited_doc.startswith("Work out")
    assert units_of(idx, "IntervalTrigger.get_next_fire_time")[0].inherited_doc.startswith("Compute")
    idx.compact()  # renumbered slots, the same units: the table stays
    assert _ids(idx._supertypes()) == _ids(inherit.Supertypes(idx.live_units))
