"""What a newcomer meets first: the service's address, and a wrong Authorization scheme."""


def test_the_root_address_leads_to_the_console_login(client, db):
    response = client.get("/", follow=True)

    assert response.redirect_chain[0] == ("/admin/", 302)
    assert response.status_code == 200
    assert response.request["PATH_INFO"] == "/admin/login/"
