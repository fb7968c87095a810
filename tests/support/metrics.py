"""The /metrics page scraped into samples, and one sample's value by name and labels."""

from prometheus_client.parser import text_string_to_metric_families


def scrape(client, **extra) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of a scrape that must succeed."""
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]
