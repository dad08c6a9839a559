"""The comparison and diagnosis summaries are typed values; ``to_dict()`` is the JSON that
``segdiff compare --json`` and ``segdiff diagnose --json`` print, text for text."""

import json

from segdiff_gui.core.findings import Finding
from segdiff_gui.runner.reports import (
    ComparisonSummary,
    DiagnosisSummary,
    ReportContext,
    comparison_summary,
    diagnosis_summary,
    report_context,
)
from segdiff_gui.storage.studies import group_of, load_study
from tests.conftest import segdiff


def _printed(*args) -> str:
    result = segdiff(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_summaries_are_typed_and_print_the_json_of_their_commands(fake_demo_cache):
    records = fake_demo_cache.records()
    group = group_of(records, records[0])
    study = load_study(fake_demo_cache, group, 0.5)
    context = report_context(group[0], str(fake_demo_cache.root))
    assert context == ReportContext(
        group[0].model_name,
        group[0].target_name,
        context.group,
        group[0].preprocessing,
        group[0].output,
        str(fake_demo_cache.root),
    )

    compared = comparison_summary(study, context)
    assert isinstance(compared, ComparisonSummary)
    assert compared.reference == "cpu b1 r0" and compared.cutoff == 0.5
    assert [row["label"] for row in compared.comparisons] == [run.label for run in study.others]
    assert compared.at_risk_pixels == int(study.at_risk.sum())
    assert compared.determinism and all(isinstance(v, str) for v in compared.determinism.values())
    printed = _printed("compare", "--cache", fake_demo_cache.root, "--json")
    assert json.dumps([compared.to_dict()], indent=2, default=str) + "\n" == printed

    diagnosed = diagnosis_summary(study, context)
    assert isinstance(diagnosed, DiagnosisSummary)
    assert diagnosed.findings and all(isinstance(f, Finding) for f in diagnosed.findings)
    printed = _printed("diagnose", "--cache", fake_demo_cache.root, "--json")
    assert json.dumps([diagnosed.to_dict()], indent=2, default=str) + "\n" == printed
    assert list(diagnosed.to_dict()) == [
        "model",
        "image",
        "group",
        "settings",
        "source",
        "reference",
        "cutoff",
        "findings",
    ]
