"""Tool search: properties of the ranking, each on a small catalog where the signal decides."""

from __future__ import annotations

from gateway.catalog import Argument, Catalog, Tool
from gateway.offer.index import index_of
from gateway.offer.query import intended_methods, match_expression, query_words, read
from gateway.offer.quoted_paths import literal_segments, quoted


def _tool(name: str, method: str, path: str, summary: str, *, deprecated: bool = False) -> Tool:
    return Tool(name=name, api="shop", operation_id=name, method=method, path=path, description=summary,
                input_schema={"type": "object"}, summary=summary, deprecated=deprecated)


_FILLER = [_tool(f"{verb}{thing}", method, f"/{thing.lower()}s", f"{verb} {thing.lower()}")
           for thing in ("Order", "Store", "Vet", "Invoice", "Coupon")
           for verb, method in (("list", "GET"), ("add", "POST"))]
"""Other operations, so that the words under test are rare enough to weigh (a word in every row has none)."""


def _names(tools: list[Tool], query: str) -> list[str]:
    return [hit.tool.name for hit in index_of(Catalog(tools + _FILLER)).search(query, limit=5)]


def test_a_deprecated_duplicate_ranks_below_its_replacement() -> None:
    old = _tool("listCustomerCards", "GET", "/customers/{id}/cards", "List a customer's cards", deprecated=True)
    new = _tool("listCustomerPaymentCards", "GET", "/customers/{id}/payment/cards", "List a customer's cards")
    names = _names([old, new], "list the customer's cards")
    assert names.index("listCustomerPaymentCards") < names.index("listCustomerCards")  # the shorter path loses


_FORWARDS = [_tool("me_mailFolders_messages_forward", "POST",
                   "/me/mailFolders/{f}/messages/{m}/microsoft.graph.forward", "Invoke action forward"),
             _tool("users_mailFolders_messages_forward", "POST",
                   "/users/{user-id}/mailFolders/{f}/messages/{m}/microsoft.graph.forward", "Invoke action forward"),
             _tool("me_messages_forward", "POST", "/me/messages/{m}/microsoft.graph.forward", "Invoke action forward"),
             _tool("me_events_forward", "POST", "/me/events/{e}/microsoft.graph.forward", "Invoke action forward")]


def test_one_operation_under_nested_paths_ranks_first_at_its_shortest_path() -> None:
    # the nested copies match "mail folder" in their paths; the shortest path takes their score
    names = _names(_FORWARDS, "forward the message in the mail folder")
    assert names[0] == "me_messages_forward"


def test_an_action_on_another_resource_is_another_operation() -> None:
    hits = index_of(Catalog(_FORWARDS + _FILLER)).search("forward", limit=2)
    assert {hit.tool.name for hit in hits} == {"me_messages_forward", "me_events_forward"}
    assert hits[0].score == hits[1].score  # neither fell behind the other as its copy


def test_the_best_of_the_asked_method_are_candidates_even_under_many_stronger_matches() -> None:
    mail = [_tool(f"mail{i}", "GET", f"/mail/folders/{i}/mail", f"Get mail folder {i} mail message")
            for i in range(150)]
    delete = _tool("deleteMessage", "DELETE", "/messages/{id}", "Delete a message")
    assert _names(mail + [delete], "delete this email")[0] == "deleteMessage"


def test_an_api_without_patch_or_put_updates_with_post() -> None:
    tools = [_tool("GetSubscriptionsId", "GET", "/subscriptions/{id}", "A subscription"),
             _tool("DeleteSubscriptionsId", "DELETE", "/subscriptions/{id}", "A subscription"),
             _tool("PostSubscriptionsId", "POST", "/subscriptions/{id}", "A subscription")]
    assert _names(tools, "change the subscription")[0] == "PostSubscriptionsId"


def test_a_thing_named_in_the_plural_asks_for_all_of_them() -> None:
    tools = [_tool("getTaskList", "GET", "/todo/lists/{id}", "Get a task list"),
             _tool("listTaskLists", "GET", "/todo/lists", "All task lists in the mailbox")]
    assert _names(tools, "show the task lists")[0] == "listTaskLists"
    assert _names(tools, "show the task list")[0] == "getTaskList"


def test_the_request_verb_is_its_first_word_and_things_after_it_are_not_verbs() -> None:
    assert intended_methods("close issue 482") == ["PATCH"]
    assert intended_methods("please delete the comment") == ["DELETE"]
    assert intended_methods("list the comments on the issue") == ["GET"]  # not POST for "comment" or "issue"
    assert intended_methods("who am I logged in as") == ["GET"]
    assert intended_methods("take the wontfix label off the issue") == ["DELETE"]  # take ... off: remove


def test_compounds_ids_and_contractions_are_read_as_words() -> None:
    assert query_words("create a OneNote notebook")[2] == ("onenote", ("one", "note"))
    assert ("todo", ("to", "do")) in query_words("show my to-do lists")
    assert [word for word, _ in query_words("refund $5 of payment pi_3abc")] == ["refund", "of", "payment"]
    assert [word for word, _ in query_words("the customer's cards")] == ["the", "customer", "cards"]
    expression = match_expression("get my OneDrive")
    assert '"onedrive"' in expression and '"one drive"' in expression and '"drive"' in expression
    assert '"one"' not in expression  # a part of the compound alone would match something else


def test_after_a_colon_comes_what_a_request_carries_or_the_request_itself() -> None:
    tools = [_tool("createIssue", "POST", "/issues", "Create an issue"),
             _tool("listCrashes", "GET", "/crashes", "List app crashes on a browser"),
             _tool("wipeDevice", "POST", "/devices/{id}/wipe", "Wipe a device"),
             _tool("listPhones", "GET", "/phones", "List phones")]
    # what comes before the colon asks: the bug's text is an argument, not words of the operation
    assert _names(tools, "log a bug: checkout crashes on Safari")[0] == "createIssue"
    assert intended_methods("log a bug: the search won't delete old drafts") == ["POST"]
    # it does not ask (a situation): the request follows the colon, and its verb is the request's
    assert intended_methods("Lea lost her phone: wipe it") == ["POST"]
    assert _names(tools, "Lea lost her phone: wipe it")[0] == "wipeDevice"
    assert "crashes" in match_expression("the checkout page: which crashes happened on Safari")  # a thing: read


def test_to_email_is_to_send_mail_but_an_email_is_a_message() -> None:
    assert '"send"' in match_expression("email the report to finance")
    assert '"send"' not in match_expression("delete this email")


def test_a_narrowed_search_answers_only_allowed_tools() -> None:
    tools = [_tool("deletePet", "DELETE", "/pets/{id}", "Delete a pet"), _tool("listPets", "GET", "/pets", "List pets")]
    index = index_of(Catalog(tools + _FILLER))
    hits = index.search("delete the pet", allowed=lambda tool: tool.method == "GET")
    assert [hit.tool.name for hit in hits] == ["listPets"]


def test_a_limit_above_the_candidates_answers_that_many() -> None:
    tools = [_tool(f"getPet{i}", "GET", f"/pets/{i}", f"Pet number {i}") for i in range(120)]
    assert len(index_of(Catalog(tools + _FILLER)).search("pet", limit=100)) == 100


def _described(name: str, method: str, path: str, description: str) -> Tool:
    """An operation with no summary, only a description (Stripe's, Slack's and Kubernetes' specs are written so)."""
    return Tool(name=name, api="shop", operation_id=name, method=method, path=path, description=description,
                input_schema={"type": "object"}, summary="")


def test_an_api_that_deletes_with_post_and_writes_no_summaries_finds_the_delete() -> None:
    slack = [_described("chat_delete", "POST", "/chat.delete", "Deletes a message."),
             _described("chat_postMessage", "POST", "/chat.postMessage", "Sends a message to a channel."),
             _described("chat_meMessage", "POST", "/chat.meMessage", "Share a me message into a channel."),
             _described("search_messages", "GET", "/search.messages", "Searches for messages matching a query."),
             _described("chat_deleteScheduledMessage", "POST", "/chat.deleteScheduledMessage",
                        "Deletes a pending scheduled message from the queue of messages to send.")]
    assert _names(slack, "delete that message")[0] == "chat_delete"


def test_the_copy_of_the_owner_meant_comes_first() -> None:
    mine = _tool("me_GetManager", "GET", "/me/manager", "Get manager")
    theirs = _tool("users_GetManager", "GET", "/users/{user-id}/manager", "Get manager")
    assert _names([mine, theirs], "who is my manager")[0] == "me_GetManager"
    assert _names([mine, theirs], "who is alice's manager")[0] == "users_GetManager"  # alice: no word of the api


def test_an_action_named_by_the_verb_beats_the_things_that_hold_the_other_words() -> None:
    invitations = [_tool(f"{verb}Invitation", method, "/invitations", f"{verb} invitation")
                   for verb, method in (("create", "POST"), ("list", "GET"))]
    accept = _tool("me_events_event_accept", "POST", "/me/events/{event-id}/microsoft.graph.accept",
                   "Invoke action accept")
    move = _tool("me_messages_message_move", "POST", "/me/messages/{message-id}/microsoft.graph.move",
                 "Invoke action move")
    update = _tool("me_UpdateEvents", "PATCH", "/me/events/{event-id}", "Update the navigation property events in me")
    tools = [*invitations, accept, move, update]
    assert _names(tools, "accept the meeting invite")[0] == "me_events_event_accept"
    # "move" is a message's action, not an event's: a meeting moves by an update
    assert _names(tools, "move the meeting to friday")[0] == "me_UpdateEvents"


def test_a_verb_and_its_particle_ask_for_what_they_mean_together() -> None:
    assert intended_methods("take the wontfix label off the issue") == ["DELETE"]
    assert intended_methods("kick carol out of the repository") == ["DELETE"]
    assert query_words("turn off branch protection")[0] == ("disable", ())


def test_what_the_path_addresses_is_a_candidate_under_many_that_share_its_words() -> None:
    # 210 operations on a calendar's things say "calendar" more often than the list of calendars does
    things = [_tool(f"listCalendar{thing}_{i}", "GET", f"/me/calendars/{{calendar}}/{thing}{i}",
                    f"List the {thing} of a calendar event in the calendar view")
              for i in range(70) for thing in ("events", "permissions", "views")]
    others = [_tool(f"listRecords{i}", "GET", f"/records{i}", f"List records {i}") for i in range(600)]
    calendars = _tool("me_ListCalendars", "GET", "/me/calendars", "List calendars")
    assert "me_ListCalendars" in _names(things + others + [calendars], "list my calendars")


def test_a_family_of_functions_takes_at_most_two_of_the_first_places() -> None:
    reports = [_tool(f"reports_getSharePointSiteUsage{what}", "GET",
                     f"/reports/microsoft.graph.getSharePointSiteUsage{what}(period='{{period}}')",
                     f"Invoke function getSharePointSiteUsage{what}")
               for what in ("Pages", "Storage", "SiteCounts", "Detail", "FileCounts", "UserCounts")]
    sites = _tool("sites_ListSite", "GET", "/sites", "Search for sites")
    assert "sites_ListSite" in _names(reports + [sites], "list the SharePoint sites")


def test_a_verb_acts_on_a_resource_named_in_the_plural_and_words_mean_what_people_mean() -> None:
    replies = _tool("teams_channels_messages_CreateReplies", "POST",
                    "/teams/{team}/channels/{channel}/messages/{message}/replies", "Send replies to a message")
    others = [_tool("me_messages_reply", "POST", "/me/messages/{m}/microsoft.graph.reply", "Invoke action reply"),
              _tool("me_messages_replyAll", "POST", "/me/messages/{m}/microsoft.graph.replyAll",
                    "Invoke action replyAll")]
    assert _names([replies, *others], "reply to the channel message")[0] == "teams_channels_messages_CreateReplies"
    unwatch = _tool("removeWatcher", "DELETE", "/issue/{key}/watchers", "Delete watcher")
    assert _names([unwatch], "stop watching PROJ-4")[:1] == ["removeWatcher"]  # watching: the verb watch's words


_PODS = [_tool("createCoreV1NamespacedPod", "POST", "/namespaces/{namespace}/pods", "create a Pod"),
         _tool("patchCoreV1NamespacedPod", "PATCH", "/namespaces/{namespace}/pods/{name}",
               "partially update the specified Pod"),
         _tool("createPodBinding", "POST", "/namespaces/{namespace}/pods/{name}/binding", "create binding of a Pod"),
         _tool("createPodEviction", "POST", "/namespaces/{namespace}/pods/{name}/eviction",
               "create eviction of a Pod")]


def test_a_thing_the_api_has_no_path_for_is_a_property_of_the_thing_it_is_put_on() -> None:
    # no path addresses labels: adding one to a pod is a change of the pod, not a new pod
    listing = Tool(name="listNodes", api="shop", operation_id="listNodes", method="GET", path="/nodes",
                   description="list objects of kind Node that a label selector picks",
                   input_schema={"type": "object"}, summary="list objects of kind Node")
    labelled = [*_PODS, listing]  # the api knows the word, in a description
    assert _names(labelled, "add a label to the pod")[0] == "patchCoreV1NamespacedPod"
    assert _names(labelled, "add a binding to the pod")[0] == "createPodBinding"  # a thing with a path of its own


def test_a_question_about_a_property_of_a_thing_reads_the_thing() -> None:
    services = [_tool("readService", "GET", "/namespaces/{namespace}/services/{name}", "read the specified Service"),
                _tool("listService", "GET", "/namespaces/{namespace}/services", "list objects of kind Service"),
                _tool("replaceService", "PUT", "/namespaces/{namespace}/services/{name}",
                      "replace the specified Service"),
                _tool("patchService", "PATCH", "/namespaces/{namespace}/services/{name}",
                      "partially update the specified Service")]
    # no path addresses an IP: asking for it asks for the service, not for a change of it
    assert _names(services, "what's the cluster IP of the db service")[0] == "readService"
    assert _names(services, "change the cluster IP of the db service")[0] in ("patchService", "replaceService")


def test_a_name_the_api_does_not_know_is_a_member_of_the_thing_it_leaves() -> None:
    groups = [_tool("deleteGroup", "DELETE", "/groups/{group}", "Delete group"),
              _tool("deleteGroupSetting", "DELETE", "/groups/{group}/settings/{setting}", "Delete group setting"),
              _tool("deleteGroupMember", "DELETE", "/groups/{group}/members/{member}/$ref", "Delete ref of navigation"),
              _tool("deleteRoleMember", "DELETE", "/roles/{role}/members/{member}", "Delete role member")]
    assert _names(groups, "remove bob from the group")[0] == "deleteGroupMember"


def test_a_thing_after_a_determiner_is_a_word_the_api_lacks_not_a_name() -> None:
    groups = [_tool("updateGroup", "PATCH", "/groups/{group}", "Update group"),
              _tool("deleteGroupMember", "DELETE", "/groups/{group}/members/{member}/$ref", "Delete ref of navigation"),
              _tool("addGroupMember", "POST", "/groups/{group}/members/$ref", "Create ref of navigation"),
              _tool("updateGroupMember", "PATCH", "/groups/{group}/members/{member}", "Update group member")]
    # "summary" is nowhere in the api, but "the summary" is a thing, not a person who is a member of the group
    assert _names(groups, "change the summary of the group")[0] == "updateGroup"
    assert _names(groups, "remove bob from the group")[0] == "deleteGroupMember"


_TRACKER = [_tool("updateVersion", "PUT", "/versions/{id}", "Update version"),
            _tool("getVersion", "GET", "/versions/{id}", "Get version"),
            _tool("mergeVersions", "PUT", "/versions/{id}/mergeto/{other}", "Merge versions"),
            _tool("getProjectVersions", "GET", "/projects/{key}/versions", "Get project versions"),
            _tool("editIssue", "PUT", "/issues/{key}", "Edit issue"),
            _tool("getIssue", "GET", "/issues/{key}", "Get issue"),
            _tool("addComment", "POST", "/issues/{key}/comments", "Add comment"),
            _tool("updateComment", "PUT", "/issues/{key}/comments/{id}", "Update comment")]


def test_a_thing_the_api_has_but_never_under_the_target_is_a_property_the_target_changes() -> None:
    # the api has versions, but a version set on an issue is a field of the issue: an edit of the issue
    assert _names(_TRACKER, "set the fix version of PROJ-7 to 4.2")[0] == "editIssue"
    assert _names(_TRACKER, "change the version of the issue")[0] == "editIssue"
    # a thing with a path under the target is its own operation; a version alone is the version's
    assert _names(_TRACKER, "change the comment on PROJ-7")[0] == "updateComment"
    assert _names(_TRACKER, "change the version")[0] == "updateVersion"
    assert _names(_TRACKER, "show the versions of the project")[0] == "getProjectVersions"


def test_a_thing_of_an_item_named_by_its_key_is_a_field_of_the_item() -> None:
    assert _names(_TRACKER, "add the 4.2 fix version to PROJ-7")[0] == "editIssue"
    assert _names(_TRACKER, "what's the fix version of PROJ-7")[0] == "getIssue"
    assert _names(_TRACKER, "what's the fix version of the release")[0] == "getVersion"  # no key: the version's


def test_of_one_operation_under_several_paths_the_one_under_the_thing_named_ranks_first() -> None:
    drives = [_tool("me_ListDrives", "GET", "/me/drives", "List drives"),
              _tool("sites_ListDrives", "GET", "/sites/{site}/drives", "List drives"),
              _tool("groups_ListDrives", "GET", "/groups/{group}/drives", "List drives")]
    assert _names(drives, "list the drives of the site")[0] == "sites_ListDrives"
    assert _names(drives, "list the drives")[0] == "me_ListDrives"  # else the shortest path


def test_who_can_and_can_i_ask_who_is_allowed() -> None:
    pods = [_tool("deletePod", "DELETE", "/namespaces/{namespace}/pods/{name}", "delete a Pod"),
            _tool("listPods", "GET", "/namespaces/{namespace}/pods", "list or watch objects of kind Pod"),
            _tool("createSelfSubjectAccessReview", "POST", "/apis/authorization/selfsubjectaccessreviews",
                  "create a SelfSubjectAccessReview")]
    pods += [_tool(f"{verb}Pod{what}", method, f"/namespaces/{{namespace}}/pods/{{name}}/{what.lower()}",
                   f"{verb} {what.lower()} of a Pod in a namespace")  # a word in many operations weighs little
             for what in ("Status", "Log", "Exec", "Eviction", "Binding", "Proxy", "Attach", "Portforward")
             for verb, method in (("read", "GET"), ("replace", "PUT"), ("delete", "DELETE"))]
    assert _names(pods, "can I delete pods in this namespace")[0] == "createSelfSubjectAccessReview"
    assert _names(pods, "can you delete the pod")[0] == "deletePod"  # a polite request, not a question
    items = [_tool("listItemPermissions", "GET", "/drives/{drive}/items/{item}/permissions",
                   "List permissions of a drive item"),
             _tool("getItemContent", "GET", "/drives/{drive}/items/{item}/content", "Get content of a drive item")]
    assert _names(items, "who can see this file")[0] == "listItemPermissions"


def test_a_verb_asks_for_the_resource_that_does_it() -> None:
    kinds = {"Deployment": "/apis/apps/v1/namespaces/{namespace}/deployments",
             "HorizontalPodAutoscaler": "/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers"}
    tools = [_tool(f"{verb}{kind}", method, path + suffix, f"{verb} {'the specified ' if suffix else 'a '}{kind}")
             for kind, path in kinds.items()
             for verb, method, suffix in (("create", "POST", ""), ("list", "GET", ""), ("read", "GET", "/{name}"),
                                          ("delete", "DELETE", "/{name}"), ("patch", "PATCH", "/{name}"))]
    tools += [_tool(f"{verb}{kind}{what}", method, f"{path}/{{name}}/{what.lower()}",
                    f"{verb} {what.lower()} of the specified {kind}")
              for kind, path in kinds.items() for what in ("Status", "Scale")  # kinds have many operations each
              for verb, method in (("read", "GET"), ("replace", "PUT"), ("patch", "PATCH"))]
    # creating one sets up what autoscales (a new deployment is the other reading, with more of the words)
    assert "createHorizontalPodAutoscaler" in _names(tools, "autoscale the deployment on CPU")[:2]


def test_a_verb_and_its_particle_are_the_one_word_the_api_uses() -> None:
    tools = [_tool("GetPayouts", "GET", "/v1/payouts", "List payouts"),
             _tool("GetPaymentIntents", "GET", "/v1/payment_intents", "List payment intents"),
             _tool("PostPaymentIntents", "POST", "/v1/payment_intents", "Create a payment intent"),
             _tool("GetPaymentIntentsIntent", "GET", "/v1/payment_intents/{intent}", "Retrieve a payment intent")]
    assert _names(tools, "how much did we pay out last month")[0] == "GetPayouts"


def test_an_argument_that_says_what_it_is_names_that_thing() -> None:
    nodes = _tool("readNode", "GET", "/nodes/{name}", "Read the specified node")
    # "node-3" is an argument (it has a digit), but it says it is a node; "PROJ-7" is a tracker's issue key
    assert query_words("is node-3 healthy") == [("is", ()), ("node", ()), ("healthy", ())]
    assert _names([nodes], "is node-3 healthy")[:1] == ["readNode"]
    issue = _tool("getIssue", "GET", "/issue/{key}", "Get an issue")
    assert _names([issue], "show me PROJ-123")[:1] == ["getIssue"]
    assert query_words("refund ch_3 now") == [("refund", ()), ("now", ())]  # a short prefix says nothing


def test_a_generic_verb_past_the_verb_is_a_thing() -> None:
    lists = _tool("createList", "POST", "/sites/{id}/lists", "Create a new list")
    rows = _tool("createRow", "POST", "/tables/{id}/rows", "Add a row")
    assert "list" in match_expression("create a new SharePoint list")
    assert "list" not in match_expression("show me the list of members")  # a quantity, not a thing
    assert "list" not in match_expression("I want to list the orders")  # the verb after "to"
    assert _names([lists, rows], "create a new SharePoint list")[0] == "createList"


def test_a_thing_named_as_said_outranks_one_named_by_a_synonym() -> None:
    # "calendar" also means an event (a meeting is on a calendar): what the request names comes first
    calendars = _tool("createCalendar", "POST", "/me/calendars", "Create calendar")
    events = _tool("createEvent", "POST", "/me/events", "Create event")
    hits = index_of(Catalog([calendars, events, *_FILLER])).search("create a new calendar for the project", limit=2)
    assert [hit.tool.name for hit in hits] == ["createCalendar", "createEvent"]
    assert hits[0].score > hits[1].score  # not a tie broken by order


def test_a_verb_that_undoes_another_means_the_others_thing() -> None:
    pins = [_tool("pins_add", "POST", "/pins.add", "Pins an item to a channel"),
            _tool("pins_remove", "POST", "/pins.remove", "Un-pins an item from a channel")]
    chat = [_tool(f"chat_{verb}", "POST", f"/chat.{verb}", f"{verb} a message") for verb in ("postMessage", "update",
                                                                                          "delete", "meMessage")]
    assert "pin" in match_expression("unpin that message")
    assert _names([*pins, *chat], "unpin that message")[0] == "pins_remove"  # not found before, then after add


def test_a_verbs_ending_off_finds_its_synonyms() -> None:
    # saved -> save -> star (Slack's saved items): the root of a regular ending, with its e back
    assert "star" in match_expression("list the messages I saved")
    assert "star" not in match_expression("list the messages I sent")


def test_a_verb_acts_on_the_thing_named_by_its_noun() -> None:
    # "bind" makes a binding: Kubernetes's clusterrolebindings, one word in the path
    roles = [_tool("createClusterRole", "POST", "/apis/rbac/v1/clusterroles", "create a ClusterRole"),
             _tool("readClusterRole", "GET", "/apis/rbac/v1/clusterroles/{name}", "read the specified ClusterRole")]
    binding = _tool("createClusterRoleBinding", "POST", "/apis/rbac/v1/clusterrolebindings",
                    "create a ClusterRoleBinding")
    assert _names([*roles, binding], "bind the cluster role to the service account")[0] == "createClusterRoleBinding"


def test_a_word_in_capitals_the_api_lacks_is_the_initials_of_words_of_its_names() -> None:
    claims = [_tool("listPersistentVolumeClaim", "GET", "/persistentvolumeclaims", "list objects of kind claim"),
              _tool("readPersistentVolumeClaim", "GET", "/persistentvolumeclaims/{name}", "read the specified claim"),
              _tool("listCustomResourceDefinition", "GET", "/customresourcedefinitions", "list definitions"),
              _tool("listPodVolume", "GET", "/pods/{name}/volumes", "list the volumes of a pod"),
              _tool("listClusterRole", "GET", "/clusterroles", "list objects of kind cluster role")]
    assert _names(claims, "list the CRDs in the cluster")[0] == "listCustomResourceDefinition"
    assert _names(claims, "show the PVC")[0] in ("readPersistentVolumeClaim", "listPersistentVolumeClaim")
    # the same letters in lower case are a word (a name, a namespace), not initials
    assert "listPersistentVolumeClaim" not in _names(claims, "show pvc")


def test_closing_or_reopening_an_issue_is_a_transition_where_the_api_has_them() -> None:
    workflow = [*_TRACKER, _tool("doTransition", "POST", "/issues/{key}/transitions", "Transition issue"),
                _tool("getTransitions", "GET", "/issues/{key}/transitions", "Get transitions"),
                _tool("deleteVersion", "DELETE", "/versions/{id}", "Delete version")]
    assert _names(workflow, "reopen PROJ-7, it's happening again")[0] == "doTransition"
    assert _names(workflow, "close out PROJ-44 as won't fix")[0] == "doTransition"


def _report(name: str, path: str, summary: str, period: bool) -> Tool:
    arguments = (Argument(name="period", location="path", wire_name="period", required=True),) if period else ()
    return Tool(name=name, api="shop", operation_id=name, method="GET", path=path, description=summary,
                input_schema={"type": "object"}, summary=summary, arguments=arguments)


def test_how_many_over_a_stretch_of_time_is_a_usage_report_where_the_api_has_them() -> None:
    mail = [_tool("sendMail", "POST", "/me/sendMail", "Send mail message"),
            _tool("listPeople", "GET", "/me/people", "List people"),
            _tool("listMessages", "GET", "/me/messages", "List messages"),
            _tool("listMailFolders", "GET", "/me/mailFolders", "List mail folders"),
            _tool("getPerson", "GET", "/me/people/{id}", "Get person"),
            _tool("sendMessage", "POST", "/me/messages/{id}/send", "Send message")]
    reports = [_report("getEmailActivityCounts", "/reports/getEmailActivityCounts(period='{period}')",
                       "Invoke function getEmailActivityCounts", True),
               _report("getMailboxUsageStorage", "/reports/getMailboxUsageStorage(period='{period}')",
                       "Invoke function getMailboxUsageStorage", True)]
    query = "how many emails did people send last month"
    assert "getEmailActivityCounts" in _names(mail + reports, query)[:2]
    # an api whose operations take no period has no such reports: its own words only
    flat = [_report(tool.name, tool.path.split("(")[0], tool.summary, False) for tool in reports]

    def score(tools: list[Tool]) -> float:
        hits = index_of(Catalog(tools + _FILLER)).search(query, limit=5)
        return next(hit.score for hit in hits if hit.tool.name == "getEmailActivityCounts")

    assert score(mail + reports) > 1.5 * score(mail + flat)


def test_a_hash_name_is_a_channel_and_an_at_name_is_someone() -> None:
    assert match_expression("who is allowed to post in #announcements").count('"channel"') == 1
    assert "announcements" not in match_expression("who is allowed to post in #announcements")
    assert "frontend" not in match_expression("show the members of @frontend")
    chats = [_tool("conversationsHistory", "GET", "/conversations.history", "Fetches a channel's history of messages"),
             _tool("announcementsList", "GET", "/announcements.list", "Lists announcements")]
    assert _names(chats, "what was said in #announcements today")[0] == "conversationsHistory"


def test_a_value_after_to_is_what_the_thing_is_set_to_not_its_target() -> None:
    scaling = [*_PODS, _tool("patchAutoscaler", "PATCH", "/namespaces/{namespace}/horizontalpodautoscalers/{name}",
                             "partially update the specified HorizontalPodAutoscaler"),
               _tool("readAutoscaler", "GET", "/namespaces/{namespace}/horizontalpodautoscalers/{name}",
                     "read the specified HorizontalPodAutoscaler")]
    assert _names(scaling, "change the autoscaler to max 20 pods")[0] == "patchAutoscaler"
    assert read("move the meeting to 3pm").target == frozenset()
    assert read("set the fix version of API-77 to 4.2").target == frozenset({"issue"})  # of API-77 comes first


def test_a_question_whose_verb_asks_for_no_method_reads() -> None:
    assert intended_methods("is the data PVC bound") == ["GET"]
    assert intended_methods("why is the pod pending") == ["GET"]
    assert intended_methods("did the last payment go through") == ["GET"]
    assert intended_methods("can you create a channel") == ["POST"]  # its verb says
    names = _names(_PODS + [_tool("readPod", "GET", "/namespaces/{namespace}/pods/{name}", "read the specified Pod")],
                   "why is the pod pending")
    assert names[0] == "readPod"


_CANCELS = [_tool("PostPaymentIntentsIntentCancel", "POST", "/v1/payment_intents/{intent}/cancel",
                  "Cancel a PaymentIntent"),
            _tool("DeleteSubscriptionsId", "DELETE", "/v1/subscriptions/{id}", "Cancel a subscription"),
            _tool("PostTerminalReadersCancel", "POST", "/v1/terminal/readers/{reader}/cancel_action",
                  "Cancel the current reader action"),
            _tool("PostTransfersId", "POST", "/v1/transfers/{id}", "Update a transfer")]


def test_an_ids_prefix_names_the_thing_it_abbreviates() -> None:
    assert _names(_CANCELS, "call off pi_5 now")[0] == "PostPaymentIntentsIntentCancel"  # initials: payment intent
    assert _names(_CANCELS, "stop sub_12 right away")[0] == "DeleteSubscriptionsId"  # the beginning: subscription
    # the word before an id names it: tr_4 is a transfer here, whatever else "tr" could stand for
    assert _names(_CANCELS, "change the description of transfer tr_4")[0] == "PostTransfersId"


def test_peoples_verbs_for_creating_changing_and_deleting_ask_for_their_method() -> None:
    assert intended_methods("kill pod web-1 so it gets recreated") == ["DELETE"]
    assert intended_methods("get rid of the jenkins service account") == ["DELETE"]
    assert intended_methods("bump the checkout deployment to image v2") == ["PATCH"]
    assert intended_methods("kick off a job that reindexes search") == ["POST"]
    pods = [*_PODS, _tool("deleteCoreV1NamespacedPod", "DELETE", "/namespaces/{namespace}/pods/{name}",
                          "delete a Pod")]
    assert _names(pods, "annotate the pod with the ticket number")[0] == "patchCoreV1NamespacedPod"
    assert _names(pods, "kill the stuck pod")[0] == "deleteCoreV1NamespacedPod"


def test_a_files_name_is_an_argument_that_names_a_file() -> None:
    assert query_words("replace script.py in my gist")[1] == ("file", ())
    tools = [_tool("repos/get-content", "GET", "/repos/{owner}/{repo}/contents/{path}", "Get repository content"),
             _tool("apps/get-webhook-config", "GET", "/app/hook/config", "Get a webhook configuration for an app"),
             _tool("actions/get-src", "GET", "/repos/{owner}/{repo}/src", "Get the src of a repository")]
    assert _names(tools, "show me src/config.yaml as it was on Monday")[0] == "repos/get-content"


def test_a_particle_past_the_object_says_where_it_is_taken_from() -> None:
    assert read("take carol off the frontend team").target == frozenset({"team"})
    assert read("turn notifications off").target == frozenset()
    teams = [_tool("teams/delete-in-org", "DELETE", "/orgs/{org}/teams/{team_slug}", "Delete a team"),
             _tool("teams/remove-membership-for-user-in-org", "DELETE",
                   "/orgs/{org}/teams/{team_slug}/memberships/{username}", "Remove team membership for a user"),
             _tool("teams/list", "GET", "/orgs/{org}/teams", "List teams")]
    assert _names(teams, "take carol off the frontend team")[0] == "teams/remove-membership-for-user-in-org"


def test_what_was_said_is_the_comments_or_the_messages() -> None:
    tools = [_tool("getComments", "GET", "/issue/{issueIdOrKey}/comment", "Get comments"),
             _tool("getUsersFromGroup", "GET", "/group/member", "Get users from group"),
             _tool("getIssue", "GET", "/issue/{issueIdOrKey}", "Get issue")]
    assert _names(tools, "what has everyone said on MOB-19 so far")[0] == "getComments"


def test_a_name_beside_the_thing_it_names_is_no_word_to_match() -> None:
    pods = [*_PODS, _tool("deleteCoreV1NamespacedPod", "DELETE", "/namespaces/{namespace}/pods/{name}", "delete a Pod"),
            _tool("getAPIVersions", "GET", "/apis/", "get available API versions"),
            _tool("deleteAPIService", "DELETE", "/apis/apiregistration/v1/apiservices/{name}", "delete an APIService")]
    assert _names(pods, "kill pod api-6d8b right now")[0] == "deleteCoreV1NamespacedPod"
    assert _names(pods, "delete the api-6d8b pod")[0] == "deleteCoreV1NamespacedPod"


def test_a_channel_where_something_is_said_names_a_message() -> None:
    slack = [_described("chat_postMessage", "POST", "/chat.postMessage", "Sends a message to a channel."),
             _described("conversations_archive", "POST", "/conversations.archive", "Archives a conversation."),
             _described("conversations_create", "POST", "/conversations.create",
                        "Initiates a public or private channel-based conversation"),
             _described("conversations_rename", "POST", "/conversations.rename", "Renames a conversation.")]
    assert _names(slack, "post the weekly metrics to #leadership on Monday")[0] == "chat_postMessage"
    assert "message" not in match_expression("archive #leadership")  # the channel itself


def test_what_follows_a_colon_is_what_the_request_carries() -> None:
    jira = [_tool("createIssue", "POST", "/rest/api/3/issue", "Create issue"),
            _tool("resetColumns", "DELETE", "/rest/api/3/filter/{id}/columns", "Reset columns"),
            _tool("resetCustomerPassword", "POST", "/rest/api/3/customer/password/reset",
                  "Reset a customer's password on mobile")]
    assert _names(jira, "open a ticket: customers can't reset their password on mobile")[0] == "createIssue"
    assert "rocket" in match_expression("make :shipit: an alias of :rocket:")  # an emoji's colons are no colon


def test_an_email_address_is_an_argument_that_names_an_email() -> None:
    assert query_words("invite jo@acme.com to the workspace")[1] == ("email", ())
    slack = [_described("users_lookupByEmail", "GET", "/users.lookupByEmail", "Find a user with an email address."),
             _described("users_list", "GET", "/users.list", "Lists all users in a Slack team."),
             _described("team_info", "GET", "/team.info", "Gets information about the current team at acme."),
             _described("users_identity", "GET", "/users.identity", "Get a user's identity.")]
    assert _names(slack, "look up the slack account for jane.doe@acme.io")[0] == "users_lookupByEmail"


def test_a_user_path_that_takes_whose_as_an_argument_is_anyones() -> None:
    account = (Argument(name="accountId", location="query", wire_name="accountId"),)
    tools = [Tool(name="getUserGroups", api="shop", operation_id="getUserGroups", method="GET",
                  path="/rest/api/3/user/groups", description="Get user groups", input_schema={"type": "object"},
                  summary="Get user groups", arguments=account),
             _tool("getMyGroups", "GET", "/rest/api/3/myself/groups", "Get my groups"),
             _tool("getGroup", "GET", "/rest/api/3/group", "Get group")]
    assert _names(tools, "which groups is the user with account 5b10 in")[0] == "getUserGroups"
    assert _names(tools, "which groups am I in")[0] == "getMyGroups"


def test_a_questions_subject_the_api_does_not_know_is_a_person() -> None:
    assert read("which teams is bob part of").possessors == ("bob",)
    assert read("is alice available right now").possessors == ("alice",)
    assert read("what meetings do I have tomorrow").possessors == ()
    assert read("is the PVC bound").possessors == ()
    teams = [_tool("me_ListJoinedTeams", "GET", "/me/joinedTeams", "Get joinedTeams from me"),
             _tool("users_ListJoinedTeams", "GET", "/users/{user-id}/joinedTeams", "Get joinedTeams from users")]
    assert _names(teams, "which teams is bob part of")[0] == "users_ListJoinedTeams"


def test_kinds_of_meeting_are_meetings() -> None:
    graph = [_tool("me_UpdateEvents", "PATCH", "/me/events/{event-id}", "Update the navigation property events in me"),
             _tool("identity_UpdateNamedLocations", "PATCH", "/identity/conditionalAccess/namedLocations/{id}",
                   "Update the navigation property namedLocations in identity")]
    assert _names(graph, "change the location of the offsite to room 4B")[0] == "me_UpdateEvents"
    assert "event" in match_expression("set up a standup every weekday")


def test_an_item_named_by_its_id_prefers_the_operations_on_one_item() -> None:
    assert read("drain node-7 for an upgrade").identified and read("tag OPS-7 with a label").identified
    assert not read("scale the deployment to 5 replicas").identified  # a count, not an id
    nodes = [_tool("listCoreV1Node", "GET", "/api/v1/nodes", "list or watch objects of kind Node"),
             _tool("createCoreV1Node", "POST", "/api/v1/nodes", "create a Node"),
             _tool("deleteCoreV1CollectionNode", "DELETE", "/api/v1/nodes", "delete collection of Node"),
             _tool("patchCoreV1Node", "PATCH", "/api/v1/nodes/{name}", "partially update the specified Node"),
             _tool("readCoreV1Node", "GET", "/api/v1/nodes/{name}", "read the specified Node")]
    names = _names(nodes, "drain node-7 for an upgrade")
    collection = names.index("deleteCoreV1CollectionNode")
    assert names.index("readCoreV1Node") < collection and names.index("patchCoreV1Node") < collection


def test_a_one_tool_api_is_searched_beside_a_bigger_one_on_equal_terms() -> None:
    # FTS5 gives a word in half of an index's rows or more its floor weight (1e-6): every word of a one-tool api
    weather = Tool(name="getForecast", api="weather", operation_id="getForecast", method="GET", path="/v1/forecast",
                   description="Weather forecast for a location.", input_schema={"type": "object"},
                   summary="Weather forecast for one location")
    sales = _tool("forecastSales", "GET", "/sales/forecast", "Forecast next month's sales")
    hits = index_of(Catalog([weather, sales, *_FILLER])).search("weather forecast for Oslo", limit=2)
    assert [hit.tool.name for hit in hits] == ["getForecast", "forecastSales"]
    assert hits[0].score > 1  # not ~1e-05


def test_giving_letting_and_putting_ask_for_a_write_and_give_me_asks_to_be_shown() -> None:
    assert intended_methods("give the design team access to the Brand folder") == ["POST", "PUT"]
    assert intended_methods("let the outside auditor view the Audit folder") == ["POST"]
    assert intended_methods("put the podcast project into the Marketing portfolio") == ["POST", "PUT"]
    assert intended_methods("give me a rundown of the pods in billing") == ["GET"]  # show me
    assert intended_methods("when does the membership renew") == ["GET"]
    folders = [_tool("listFolderCollaborations", "GET", "/folders/{folder_id}/collaborations",
                     "List the access granted on a folder"),
               _tool("createCollaboration", "POST", "/folders/{folder_id}/collaborations", "Grant access to a folder")]
    assert _names(folders, "give the design team access to the Brand folder")[0] == "createCollaboration"
    assert _names(folders, "give me the access on the Brand folder")[0] == "listFolderCollaborations"


def test_to_be_told_whenever_something_happens_is_a_webhook() -> None:
    assert "webhook" in match_expression("notify our service whenever a file is uploaded")
    files = [_tool("uploadFile", "POST", "/files/content", "Upload a file into a folder"),
             _tool("getFile", "GET", "/files/{file_id}", "Get a file's information"),
             _tool("createWebhook", "POST", "/webhooks", "Create a webhook"),
             _tool("listWebhooks", "GET", "/webhooks", "List all webhooks")]
    # the upload's words still weigh more (the file, its folder): the webhook is found, second, not first
    assert _names(files, "call our endpoint whenever a file is uploaded to the Contracts folder")[:2] == [
        "uploadFile", "createWebhook"]


def test_a_request_that_starts_with_a_determiner_starts_with_a_thing_not_a_verb() -> None:
    request = read("the sprint board needs a 'Ready for QA' column")
    assert request.acts == ()  # "sprint" is no act (a resource named sprints would be its)
    assert request.determined  # a common noun ("the ..."), not a name
    jammed = read("the printer jammed again")
    assert jammed.acts == () and not jammed.methods


def test_after_a_situation_and_a_comma_comes_the_request() -> None:
    assert intended_methods("the brewery's old card reader died, remove it from our account") == ["DELETE"]
    assert intended_methods("api-7 has been Terminating for an hour, remove it") == ["DELETE"]
    assert intended_methods("list the repos, issues and pull requests of acme") == ["GET"]  # a list: as written
    readers = [_tool("listReaders", "GET", "/terminal/readers", "List readers"),
               _tool("getReader", "GET", "/terminal/readers/{reader}", "Retrieve a reader of the account"),
               _tool("deleteReader", "DELETE", "/terminal/readers/{reader}", "Discard a reader")]
    assert _names(readers, "the brewery's old card reader died, remove it from our account")[0] == "deleteReader"


def test_what_should_be_or_is_needed_asks_for_a_change() -> None:
    assert intended_methods("the webinar sign-up form should require a Company field") == ["POST", "PATCH", "PUT"]
    assert intended_methods("the sftp service needs a fixed external IP") == ["POST", "PATCH", "PUT"]
    assert intended_methods("which approvals should the staging environment wait for") == ["GET"]  # its verb says
    zoom = [_tool("webinarRegistrantQuestionGet", "GET", "/webinars/{webinarId}/registrants/questions",
                  "List the registration questions of a webinar"),
            _tool("webinarRegistrantQuestionUpdate", "PATCH", "/webinars/{webinarId}/registrants/questions",
                  "Update the registration questions of a webinar")]
    assert _names(zoom, "the webinar registration should ask a question about the company")[0] == \
        "webinarRegistrantQuestionUpdate"


def test_a_wish_of_ours_is_what_our_program_needs_not_a_change() -> None:
    assert intended_methods("our audit tool must hear about every secret change in the cluster") == []
    secrets = [_tool("createSecret", "POST", "/namespaces/{namespace}/secrets", "create a Secret"),
               _tool("listSecretForAllNamespaces", "GET", "/secrets", "list or watch objects of kind Secret")]
    assert _names(secrets, "our audit tool should see every secret in the cluster")[0] == "listSecretForAllNamespaces"
    assert intended_methods("the sftp service needs a fixed external IP") == ["POST", "PATCH", "PUT"]  # the api's thing


def test_an_update_is_asked_of_the_update_method_the_api_has() -> None:
    # Jira, Asana, Box and Apacta change their things by PUT alone: "change" (PATCH) asks for their PUT, not a POST
    summaries = [_tool("issueSummaryPost", "POST", "/issues/{issueIdOrKey}/summary", "Issue summary"),
                 _tool("issueSummaryPut", "PUT", "/issues/{issueIdOrKey}/summary", "Issue summary")]
    assert _names(summaries, "change the summary of issue PROJ-7")[0] == "issueSummaryPut"
    # an api with neither update method (Stripe) is still asked for POST
    prices = [_tool("PostPricesPrice", "POST", "/v1/prices/{price}", "Update a price"),
              _tool("GetPricesPrice", "GET", "/v1/prices/{price}", "Retrieve a price")]
    assert _names(prices, "change the nickname of price_5")[0] == "PostPricesPrice"


def test_streaming_things_reads_them() -> None:
    assert intended_methods("stream the controller revisions in monitoring as they appear") == ["GET"]
    revisions = [_tool("createRevision", "POST", "/namespaces/{namespace}/controllerrevisions",
                       "create a ControllerRevision"),
                 _tool("listRevision", "GET", "/namespaces/{namespace}/controllerrevisions",
                       "list or watch objects of kind ControllerRevision")]
    assert _names(revisions, "stream the controller revisions in monitoring")[0] == "listRevision"


def test_paging_and_where_ask_to_be_shown() -> None:
    assert intended_methods("page through every member with a cursor") == ["GET"]
    assert intended_methods("where does circuit LUM-7781 land on our side") == ["GET"]


def test_a_request_for_every_thing_with_no_verb_reads() -> None:
    assert intended_methods("every invoice we voided this year, for the auditor") == ["GET"]
    assert intended_methods("all the refunds we've given out this week") == ["GET"]
    assert intended_methods("every invoice of cus_1 should carry a PO number") == ["POST", "PATCH", "PUT"]  # a wish
    files = [_tool("createProjectFile", "POST", "/projects/{project_id}/files", "Add a file to a project"),
             _tool("listProjectFiles", "GET", "/projects/{project_id}/files", "List the files of a project")]
    assert _names(files, "every file of project 8812")[0] == "listProjectFiles"


def test_making_a_thing_something_is_a_change() -> None:
    assert intended_methods("make a 30% off coupon for three months") == ["POST"]  # a new thing
    assert intended_methods("make the 'blocked-by-legal' tag red") == ["POST", "PATCH", "PUT"]
    tags = [_tool("addFollowersForTag", "POST", "/tags/{tag_gid}/addFollowers", "Add followers to a tag"),
            _tool("updateTag", "PUT", "/tags/{tag_gid}", "Update a tag")]
    assert _names(tags, "make the 'blocked-by-legal' tag red")[0] == "updateTag"


def test_taking_someone_out_of_a_group_removes_them() -> None:
    assert intended_methods("Lee's contract ended, take him out of the Contractors group") == ["DELETE"]
    groups = [_tool("getGroup", "GET", "/groups/{group_id}", "Get a group"),
              _tool("deleteGroupMembership", "DELETE", "/group_memberships/{group_membership_id}",
                    "Remove a user from a group")]
    assert _names(groups, "Lee's contract ended, take him out of the Contractors group")[0] == "deleteGroupMembership"


def test_retiring_or_throwing_away_a_thing_deletes_it() -> None:
    assert intended_methods("retire the no-latest-tag CEL policy") == ["DELETE"]
    assert intended_methods("throw away every claim template in ml-old") == ["DELETE"]
    jobs = [_tool("createJob", "POST", "/namespaces/{namespace}/jobs", "create a Job"),
            _tool("deleteJob", "DELETE", "/namespaces/{namespace}/jobs/{name}", "delete a Job")]
    assert _names(jobs, "retire the scheduled report job in analytics")[0] == "deleteJob"


_GROUPS = [_tool("getBatchV1APIResources", "GET", "/apis/batch/v1/", "get available resources"),
           _tool("getBatchAPIGroup", "GET", "/apis/batch/", "get information of a group"),
           _tool("getNetworkingV1APIResources", "GET", "/apis/networking.k8s.io/v1/", "get available resources"),
           _tool("getNetworkingAPIGroup", "GET", "/apis/networking.k8s.io/", "get information of a group"),
           *(_tool(f"{verb}{group}V1{kind}", method, f"/apis/{path}/v1/{kind.lower()}s",
                   f"{verb} objects of kind {kind}")
             for group, path, kinds in (("Batch", "batch", ("Job", "CronJob")),
                                        ("Networking", "networking.k8s.io", ("Ingress", "NetworkPolicy")))
             for kind in kinds for verb, method in (("list", "GET"), ("create", "POST")))]


def test_a_path_the_request_quotes_is_read_as_the_paths_words_not_an_argument() -> None:
    # "networking.k8s.io/v1" has a digit, the mark of an id or a version, but it is this api's path: its words
    # count, and the operation at that path (not under it) is the one asked for
    names = _names(_GROUPS, "which resources does networking.k8s.io/v1 serve")
    assert names[0] == "getNetworkingV1APIResources" and "getBatchV1APIResources" not in names[:3]
    assert _names(_GROUPS, "is networking.k8s.io served here, in which versions")[0] == "getNetworkingAPIGroup"
    assert _names(_GROUPS, "does batch/v1 serve cronjobs")[0] == "getBatchV1APIResources"
    # a token with a digit that is no path of the api stays an argument
    assert _names(_GROUPS, "which resources does storage.k8s.io/v1 serve")[0] != "getNetworkingV1APIResources"


_NETBOX = [_tool(f"{area}_{kind}_{verb}", method, f"/{area}/{kind}/" + ("{id}/" if one else ""), f"{summary} {noun}")
           for area, kind, noun in (("dcim", "interfaces", "interface"), ("users", "tokens", "token"),
                                    ("users", "users", "user"), ("dcim", "cables", "cable"))
           for verb, method, one, summary in (("list", "GET", False, "All of the"), ("read", "GET", True, "One"),
                                              ("update", "PUT", True, "Replace a"),
                                              ("partial_update", "PATCH", True, "Change a"),
                                              ("delete", "DELETE", True, "Remove a"))]
_TWILIO = [_tool("ListCall", "GET", "/2010-04-01/Accounts/{AccountSid}/Calls.json",
                 "Retrieves a collection of calls made to and from your account"),
           _tool("FetchCall", "GET", "/2010-04-01/Accounts/{AccountSid}/Calls/{Sid}.json",
                 "Fetch the call specified by the provided Call SID"),
           _tool("UpdateCall", "POST", "/2010-04-01/Accounts/{AccountSid}/Calls/{Sid}.json", "Redirect a live call"),
           _tool("ListCallRecording", "GET", "/2010-04-01/Accounts/{AccountSid}/Calls/{CallSid}/Recordings.json",
                 "Recordings of a call")]


def test_an_operation_quoted_as_the_spec_writes_its_path_is_the_one_asked_for() -> None:
    # a developer quotes the request itself: the server's base path before the spec's path, values in place of its
    # parameters, the method before it; its words count, and the operation at that path of that method is asked for
    assert _names(_NETBOX, "GET /api/users/tokens/17/: when the token expires")[0] == "users_tokens_read"
    assert _names(_NETBOX, "PATCH /api/users/users/88/ with is_active false")[0] == "users_users_partial_update"
    assert _names(_NETBOX, "GET /api/dcim/interfaces/8812/ for its mtu")[0] == "dcim_interfaces_read"
    assert _names(_TWILIO, "GET Calls/CA5.json for the price and the number it came in on")[0] == "FetchCall"
    # a token with a slash that is no path of the api stays what it was
    assert _names(_NETBOX, "the cable from et-0/0/1 to the far end")[0].startswith("dcim_cables")
    # a possessive after a quoted path does not hide it
    segments = literal_segments(tool.path for tool in _GROUPS)
    assert [run.parts for run in quoted("check batch/v1's resource list", segments)] == [("batch", "v1")]


def test_the_operation_at_a_quoted_path_is_found_under_many_that_match_more_of_the_request() -> None:
    # sixty operations under events.k8s.io/v1 say more of the request's words than the group's resource list does; the
    # list is the operation at the path the request quotes: it is scored however far down its words put it, and wins
    events = [_tool(f"watchEventsV1Event{i}", "GET", f"/apis/events.k8s.io/v1/watch/namespaces/{{ns}}/events{i}",
                    "watch the list of events: resources of kind Event, with the watch verb") for i in range(60)]
    resources = _tool("getEventsV1APIResources", "GET", "/apis/events.k8s.io/v1/", "get available resources")
    query = "our log shipper wants to watch events: does events.k8s.io/v1's resource list give events the watch verb"
    assert _names([*events, resources], query)[0] == "getEventsV1APIResources"


def test_a_plain_word_in_a_quoted_path_is_no_value_of_a_parameter() -> None:
    # "/applications/delta": delta is a word (Graph's function `microsoft.graph.delta()`), not an application's id
    tools = [_tool(f"applications_{verb}Application", method, "/applications/{application-id}", f"{verb} application")
             for verb, method in (("Get", "GET"), ("Update", "PATCH"), ("Delete", "DELETE"))]
    delta = _tool("applications_delta", "GET", "/applications/microsoft.graph.delta()", "Invoke function delta")
    query = "incremental sync of app registrations with /applications/delta and the deltaLink from the last run"
    assert _names([*tools, delta], query)[0] == "applications_delta"
